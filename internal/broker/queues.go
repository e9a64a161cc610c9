package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pgquectl/pgquectl/internal/db"
)

// QueueInfo describes a queue for the resources routes.
type QueueInfo struct {
	QueueID    int
	Queue      string
	Namespace  string
	Task       string
	CreatedAt  time.Time
	Partitions int64
	// Options are the effective broker options (HTTP names).
	Options map[string]any
}

// Queues lists the queues (one, when name is not ""), in name order: one
// call of pgque.broker_queues.
func Queues(ctx context.Context, q Querier, name string) ([]QueueInfo, error) {
	rows, err := q.Query(ctx, `SELECT queue_id, queue_name, namespace, task, created_at, partitions, options
		FROM pgque.broker_queues($1)`, strOrNil(name))
	if err != nil {
		return nil, wrap("list queues", err)
	}
	defer rows.Close()
	var out []QueueInfo
	for rows.Next() {
		var i QueueInfo
		var ns, task *string
		var raw []byte
		if err := rows.Scan(&i.QueueID, &i.Queue, &ns, &task, &i.CreatedAt, &i.Partitions, &raw); err != nil {
			return nil, wrap("list queues", err)
		}
		i.Namespace, i.Task = db.Deref(ns), db.Deref(task)
		if err := json.Unmarshal(raw, &i.Options); err != nil {
			return nil, wrap("list queues", err)
		}
		out = append(out, i)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list queues", err)
	}
	return out, nil
}

// PartitionDepth is the depth of one partition for one consumer group.
type PartitionDepth struct {
	Partition     string
	PartitionUUID string
	// Pending counts the events the group has not done yet (committed,
	// after its cursor; leased ones included; not ticked yet included).
	Pending int64
	// Retained counts the events still in the queue's event tables.
	Retained int64
}

// QueueDepth is the depth of queue by partition for group ("" = queue
// mode). An unknown queue, or a named group that has not subscribed to the
// queue, is ErrNotFound. One call of pgque.queue_depth.
func QueueDepth(ctx context.Context, q Querier, queue, group string) ([]PartitionDepth, error) {
	rows, err := q.Query(ctx, `SELECT partition_name, partition_uuid::text, retained, pending
		FROM pgque.queue_depth($1, $2)`, queue, strOrNil(group))
	if err != nil {
		return nil, wrap("queue depth", err)
	}
	defer rows.Close()
	out := []PartitionDepth{}
	for rows.Next() {
		var d PartitionDepth
		if err := rows.Scan(&d.Partition, &d.PartitionUUID, &d.Retained, &d.Pending); err != nil {
			return nil, wrap("queue depth", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("queue depth", err)
	}
	return out, nil
}
