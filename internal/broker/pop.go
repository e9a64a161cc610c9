package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
)

// Verdict kinds of a pop-list candidate.
const (
	// VerdictTook: messages were taken (Drained: nothing else pending).
	VerdictTook = "took"
	// VerdictEmpty: nothing pending for this group.
	VerdictEmpty = "empty"
	// VerdictLeased: work may be pending but cannot be taken now (a live
	// lease, a concurrent claim, delayedProcessing or windowBuffer); look
	// again at Until.
	VerdictLeased = "leased"
)

// Pop asks for messages of one queue for one consumer group.
type Pop struct {
	Queue string
	Group string // "" = QueueMode
	// Batch is the most messages to take (>= 1), MaxPartitions the most
	// partitions to take them from (0 = 1).
	Batch         int
	MaxPartitions int
	// LeaseSeconds 0 = the queue's leaseTime.
	LeaseSeconds int
	AutoAck      bool
	// SubscriptionMode "all" (the default, "": from the oldest retained
	// message) or "new" (from the queue's latest tick); SubscriptionFrom,
	// when set, starts a new group at that time. Only a group's first
	// contact with the queue uses them.
	SubscriptionMode string
	SubscriptionFrom *time.Time
}

// Message is one delivered message.
type Message struct {
	ID              string
	TransactionID   string
	PartitionID     int32
	PartitionUUID   string
	Partition       string
	Data            json.RawMessage
	CreatedAt       time.Time
	LeaseID         string // "" with auto-ack
	LeaseUntil      time.Time
	DeliveryAttempt int
	EventID         int64
}

// Verdict is what a pop found at one candidate partition.
type Verdict struct {
	PartitionID   int32
	PartitionUUID string
	Partition     string
	Kind          string // VerdictTook, VerdictEmpty, VerdictLeased
	Drained       bool
	Until         time.Time // lease expiry (took), revisit time (leased); zero otherwise
}

// PopResult holds the messages taken (grouped by partition, in event order)
// and one verdict per evaluated candidate.
type PopResult struct {
	LeaseID  string
	Messages []Message
	Verdicts []Verdict
}

func (p Pop) args(parts any) []any {
	group := GroupOrDefault(p.Group)
	maxParts := p.MaxPartitions
	if maxParts == 0 {
		maxParts = 1
	}
	var lease *int
	if p.LeaseSeconds != 0 {
		l := p.LeaseSeconds
		lease = &l
	}
	return []any{p.Queue, group, parts, p.Batch, maxParts, lease, p.AutoAck, p.SubscriptionMode, p.SubscriptionFrom}
}

const popCols = `partition_id, partition_uuid::text, partition_name, verdict, drained, until, lease_id::text,
	message_id::text, transaction_id, payload, created_at, delivery_attempt, ev_id`

// PopList is the claim core over candidate partitions (ids, in preference
// order): one call of pgque.pop_list. The hot-list calls it with the
// partitions it believes hot.
func PopList(ctx context.Context, q Querier, p Pop, partitions []int32) (PopResult, error) {
	rows, err := q.Query(ctx, `SELECT `+popCols+` FROM pgque.pop_list($1, $2, $3::int[], $4, $5, $6, $7, $8, $9)`,
		p.args(partitions)...)
	return scanPop("pop", rows, err)
}

// PopPartition pops from the named partition only (an unknown partition
// yields nothing): one call of pgque.pop_partition.
func PopPartition(ctx context.Context, q Querier, p Pop, partition string) (PopResult, error) {
	args := p.args(partition)
	rows, err := q.Query(ctx, `SELECT `+popCols+` FROM pgque.pop_partition($1, $3, $2, $4, $5, $6, $7, $8, $9)`, args...)
	return scanPop("pop partition", rows, err)
}

func scanPop(op string, rows pgx.Rows, err error) (PopResult, error) {
	var res PopResult
	if err != nil {
		return res, wrap(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		row, err := scanPopRow(rows)
		if err != nil {
			return res, wrap(op, err)
		}
		row.into(&res)
	}
	if err := rows.Err(); err != nil {
		return res, wrap(op, err)
	}
	return res, nil
}

// popRow is one row of pop_list's result: a verdict (msg nil) or a message.
type popRow struct {
	pid                                    int32
	puuid, pname, verdict, lease, msg, txn *string
	data                                   *string
	drained                                *bool
	until, created                         *time.Time
	attempt                                *int32
	evID                                   *int64
}

// scanPopRow scans popCols, after the extra leading columns in extra.
func scanPopRow(rows pgx.Rows, extra ...any) (popRow, error) {
	var r popRow
	dest := append(extra, &r.pid, &r.puuid, &r.pname, &r.verdict, &r.drained, &r.until, &r.lease, &r.msg, &r.txn,
		&r.data, &r.created, &r.attempt, &r.evID)
	return r, rows.Scan(dest...)
}

func (r popRow) into(res *PopResult) {
	if r.msg == nil {
		v := Verdict{PartitionID: r.pid, PartitionUUID: db.Deref(r.puuid), Partition: db.Deref(r.pname), Kind: db.Deref(r.verdict)}
		if r.drained != nil {
			v.Drained = *r.drained
		}
		if r.until != nil {
			v.Until = *r.until
		}
		res.Verdicts = append(res.Verdicts, v)
		return
	}
	m := Message{ID: *r.msg, TransactionID: db.Deref(r.txn), PartitionID: r.pid, PartitionUUID: db.Deref(r.puuid),
		Partition: db.Deref(r.pname), LeaseID: db.Deref(r.lease), EventID: *r.evID}
	if r.data != nil {
		m.Data = json.RawMessage(*r.data)
	}
	if r.created != nil {
		m.CreatedAt = *r.created
	}
	if r.until != nil {
		m.LeaseUntil = *r.until
	}
	if r.attempt != nil {
		m.DeliveryAttempt = int(*r.attempt)
	}
	res.LeaseID = m.LeaseID
	res.Messages = append(res.Messages, m)
}
