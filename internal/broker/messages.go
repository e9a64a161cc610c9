package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
)

// MessageFilter selects the messages a listing returns. Queue, Namespace
// and Task are stored names ("" = any); Tenant scopes the listing to the
// queues of one broker tenant ("" = the default tenant).
type MessageFilter struct {
	Tenant    string
	Queue     string
	Partition string
	Namespace string
	Task      string
	Status    string
	From, To  time.Time // zero: an hour ago / now
	Limit     int
	Offset    int
}

// MessageInfo is one message as the messages routes show it.
type MessageInfo struct {
	Queue         string // stored queue name
	PartitionUUID string
	Partition     string
	MessageID     string
	TransactionID string
	Data          json.RawMessage
	CreatedAt     time.Time
	Namespace     string // stored label
	Task          string // stored label
	Priority      json.RawMessage
	Status        string
	ConsumedBy    int
	TotalGroups   int
	QueueLease    *time.Time // __QUEUE_MODE__'s live lease holding it
}

// MessageDetail is one message with its queue's options, its dead letter
// and its consumer groups.
type MessageDetail struct {
	MessageInfo
	Options    json.RawMessage
	Error      *string
	RetryCount *int
	Groups     []GroupState
}

// GroupState is where one consumer group stands with a message.
type GroupState struct {
	Name       string
	Consumed   bool
	LeaseUntil *time.Time
}

// Mode is the consumption mode over the queues a listing covers.
type Mode struct {
	HasQueueMode bool
	BusGroups    int
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ListMessages returns one page of messages (newest first) and the mode
// of the queues it covers: pgque.message_list and pgque.message_mode in
// one round trip.
func ListMessages(ctx context.Context, q Querier, f MessageFilter) ([]MessageInfo, Mode, error) {
	rows, err := q.Query(ctx, `WITH m AS (SELECT * FROM pgque.message_mode($1, $2))
		SELECT l.queue_name, l.partition_uuid::text, l.partition_name, l.message_id::text, l.transaction_id, l.data,
		       l.created_at, l.namespace, l.task, l.priority, l.status, l.consumed_by, l.total_groups, l.queue_lease,
		       m.has_queue_mode, m.bus_groups
		  FROM m LEFT JOIN pgque.message_list($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) l ON true`,
		f.Tenant, strOrNil(f.Queue), strOrNil(f.Partition), strOrNil(f.Namespace), strOrNil(f.Task),
		strOrNil(f.Status), timeOrNil(f.From), timeOrNil(f.To), f.Limit, f.Offset)
	if err != nil {
		return nil, Mode{}, wrap("list messages", err)
	}
	defer rows.Close()
	var out []MessageInfo
	var mode Mode
	for rows.Next() {
		var queue, puuid, part, id, txn, data, ns, task, status *string
		var created *time.Time
		var prio []byte
		var consumed, total *int
		var m MessageInfo
		if err := rows.Scan(&queue, &puuid, &part, &id, &txn, &data, &created, &ns, &task, &prio, &status,
			&consumed, &total, &m.QueueLease, &mode.HasQueueMode, &mode.BusGroups); err != nil {
			return nil, Mode{}, wrap("list messages", err)
		}
		if queue == nil { // no message: the mode row alone
			continue
		}
		m.Queue, m.PartitionUUID, m.Partition, m.MessageID = *queue, db.Deref(puuid), db.Deref(part), db.Deref(id)
		m.TransactionID, m.Namespace, m.Task, m.Status = db.Deref(txn), db.Deref(ns), db.Deref(task), db.Deref(status)
		m.Data, m.Priority = rawOrNil(data), prio
		if created != nil {
			m.CreatedAt = *created
		}
		if consumed != nil {
			m.ConsumedBy = *consumed
		}
		if total != nil {
			m.TotalGroups = *total
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, Mode{}, wrap("list messages", err)
	}
	return out, mode, nil
}

func rawOrNil(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// GetMessage returns a message by its Queen address (partition UUID,
// transactionId or message id) in a queue of tenant ("" = default), and
// the mode of its queue; ErrNotFound when there is none (unknown, another
// tenant's, deleted): pgque.message_get.
func GetMessage(ctx context.Context, q Querier, tenant, partitionUUID, txn string) (MessageDetail, Mode, error) {
	var d MessageDetail
	var mode Mode
	var data, ns, task *string
	var names []string
	var passed []bool
	var leases []*time.Time
	err := q.QueryRow(ctx, `SELECT g.queue_name, g.partition_name, g.message_id::text, g.transaction_id, g.data,
		       g.created_at, g.namespace, g.task, g.options -> 'priority', g.options, g.status, g.queue_lease,
		       g.error, g.retry_count, g.group_names, g.group_passed, g.group_leases,
		       m.has_queue_mode, m.bus_groups
		  FROM pgque.message_get($1, $2::uuid, $3) g
		 CROSS JOIN LATERAL pgque.message_mode($1, g.queue_name) m`, tenant, partitionUUID, txn).Scan(
		&d.Queue, &d.Partition, &d.MessageID, &d.TransactionID, &data, &d.CreatedAt, &ns, &task, &d.Priority,
		&d.Options, &d.Status, &d.QueueLease, &d.Error, &d.RetryCount, &names, &passed, &leases,
		&mode.HasQueueMode, &mode.BusGroups)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, mode, fmt.Errorf("get message: Message not found: %w", ErrNotFound)
	}
	if err != nil {
		return d, mode, wrap("get message", err)
	}
	d.PartitionUUID = partitionUUID
	d.Data, d.Namespace, d.Task = rawOrNil(data), db.Deref(ns), db.Deref(task)
	for i, n := range names {
		g := GroupState{Name: n}
		if i < len(passed) {
			g.Consumed = passed[i]
		}
		if i < len(leases) {
			g.LeaseUntil = leases[i]
		}
		d.Groups = append(d.Groups, g)
	}
	return d, mode, nil
}

// DeleteMessage marks a message deleted by its Queen address in a queue of
// tenant ("" = default): consumer groups never receive it again (its event
// row stays; docs/design/broker.md "Deleting a message"). ErrNotFound when
// nothing was marked (unknown, another tenant's, deleted already):
// pgque.message_delete.
func DeleteMessage(ctx context.Context, q Querier, tenant, partitionUUID, txn string) error {
	var n int
	if err := q.QueryRow(ctx, `SELECT pgque.message_delete($1, $2::uuid, $3)`, tenant, partitionUUID, txn).Scan(&n); err != nil {
		return wrap("delete message", err)
	}
	if n == 0 {
		return fmt.Errorf("delete message: Message not found: %w", ErrNotFound)
	}
	return nil
}
