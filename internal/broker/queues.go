package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
// query of pgque.queue with broker_options.
func Queues(ctx context.Context, q Querier, name string) ([]QueueInfo, error) {
	rows, err := q.Query(ctx, `SELECT qu.queue_id, qu.queue_name, qu.queue_options->>'namespace', qu.queue_options->>'task',
		qu.queue_created, (SELECT count(*) FROM pgque.partition p WHERE p.part_queue = qu.queue_id),
		pgque.broker_options(qu.queue_options)
		FROM pgque.queue qu WHERE $1::text IS NULL OR qu.queue_name = $1 ORDER BY qu.queue_name`, strOrNil(name))
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
		i.Namespace, i.Task = deref(ns), deref(task)
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

// PartitionDepth is the number of retained events of one partition.
type PartitionDepth struct {
	Partition     string
	PartitionUUID string
	Messages      int64
}

// QueueDepth counts a queue's retained events by partition (events still
// in its event tables, read or not). An unknown queue is ErrNotFound.
// Two queries: the queue's id, then one count over its event tables.
func QueueDepth(ctx context.Context, q Querier, queue string) ([]PartitionDepth, error) {
	var id int
	if err := q.QueryRow(ctx, `SELECT queue_id FROM pgque.queue WHERE queue_name = $1`, queue).Scan(&id); err != nil {
		if err == pgx.ErrNoRows {
			return nil, fmt.Errorf("queue depth: no queue %q: %w", queue, ErrNotFound)
		}
		return nil, wrap("queue depth", err)
	}
	// Table names are built from the integer id only.
	rows, err := q.Query(ctx, fmt.Sprintf(`SELECT p.part_name, p.part_uuid::text, coalesce(c.n, 0)
		FROM pgque.partition p LEFT JOIN (
		  SELECT ev_partition, count(*) AS n FROM (
		    SELECT ev_partition FROM pgque.event_%[1]d_0 UNION ALL
		    SELECT ev_partition FROM pgque.event_%[1]d_1 UNION ALL
		    SELECT ev_partition FROM pgque.event_%[1]d_2) e GROUP BY ev_partition) c ON c.ev_partition = p.part_id
		WHERE p.part_queue = $1 ORDER BY p.part_id`, id), id)
	if err != nil {
		return nil, wrap("queue depth", err)
	}
	defer rows.Close()
	out := []PartitionDepth{}
	for rows.Next() {
		var d PartitionDepth
		if err := rows.Scan(&d.Partition, &d.PartitionUUID, &d.Messages); err != nil {
			return nil, wrap("queue depth", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("queue depth", err)
	}
	return out, nil
}
