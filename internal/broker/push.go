package broker

import (
	"context"
	"encoding/json"
	"sort"
)

// Item is one message to push.
type Item struct {
	Queue     string
	Partition string // "" = "Default"
	// Payload is the message body, any JSON value.
	Payload json.RawMessage
	// TransactionID is optional; when set, a second push of the same id to
	// the same (queue, partition) inside the queue's dedup window is a
	// duplicate.
	TransactionID string
}

// Push statuses.
const (
	StatusQueued    = "queued"
	StatusDuplicate = "duplicate"
)

// PushResult is the outcome of one Item, in request order.
type PushResult struct {
	Index         int
	MessageID     string // for a duplicate: the original's
	TransactionID string // the given one, else the message id
	Queue         string
	Status        string // StatusQueued or StatusDuplicate
	// PartitionID is the partition's dense id in its queue (what the
	// hot-list marks).
	PartitionID int32
	// Txid is the id of the transaction that stored it
	// (pg_current_xact_id()). A group claim sees the message as soon as it
	// committed; a classic consumer once a tick's snapshot sees it.
	Txid int64
}

// Push stores items (queues and partitions may be mixed; both are created
// on first use) with one call of pgque.push. All or nothing: an error means
// nothing was pushed.
func Push(ctx context.Context, q Querier, items []Item) ([]PushResult, error) {
	return PushNotify(ctx, q, items, Notify{})
}

// Notify names a NOTIFY a push sends in its own transaction: on Channel,
// payload Prefix + the stored queue name, once per queue it stored a
// message in (PostgreSQL folds a transaction's identical notifications
// into one). It is delivered at commit, when the messages are claimable:
// the brokers use it to wake each other's parked pops. A zero Notify
// sends nothing.
type Notify struct {
	Channel, Prefix string
}

// PushNotify is Push with n sent in the push's transaction (the statement
// itself: no extra round trip; the transaction has an id already).
func PushNotify(ctx context.Context, q Querier, items []Item, n Notify) ([]PushResult, error) {
	if len(items) == 0 {
		return []PushResult{}, nil
	}
	queues := make([]string, len(items))
	parts := make([]*string, len(items))
	payloads := make([]*string, len(items))
	txns := make([]*string, len(items))
	for i, it := range items {
		queues[i] = it.Queue
		if it.Partition != "" {
			p := it.Partition
			parts[i] = &p
		}
		if len(it.Payload) > 0 {
			p := string(it.Payload)
			payloads[i] = &p
		}
		if it.TransactionID != "" {
			t := it.TransactionID
			txns[i] = &t
		}
	}
	var channel *string
	if n.Channel != "" {
		channel = &n.Channel
	}
	rows, err := q.Query(ctx,
		`SELECT idx, message_id::text, transaction_id, queue_name, status, partition_id,
		        pg_current_xact_id()::text::bigint,
		        CASE WHEN $5::text IS NOT NULL AND status = 'queued' THEN pg_notify($5, $6 || queue_name) END
		   FROM pgque.push($1::text[], $2::text[], $3::jsonb[], $4::text[])`,
		queues, parts, payloads, txns, channel, n.Prefix)
	if err != nil {
		return nil, wrap("push", err)
	}
	defer rows.Close()
	out := make([]PushResult, 0, len(items))
	for rows.Next() {
		var r PushResult
		if err := rows.Scan(&r.Index, &r.MessageID, &r.TransactionID, &r.Queue, &r.Status, &r.PartitionID, &r.Txid, new(any)); err != nil {
			return nil, wrap("push", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("push", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}
