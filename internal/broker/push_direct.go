package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
)

// pushRoutes caches, per queue name, what a push needs to skip pgque.push:
// the queue's id, its current event table and its partitions' ids. With
// them a push of items without transactionId into one queue is one call
// of the queue's generated pgque.push_direct_q<id>_t<table> (one INSERT,
// planned once per connection). A stale route (the queue dropped or
// recreated, its event tables switched) makes that call insert nothing
// (or fail: the function is gone); the push then goes through pgque.push
// and the route is looked up again (pgque.push_route). Partition ids
// never change while their queue exists. Safe for concurrent use.
type pushRoutes struct {
	mu     sync.Mutex
	queues map[string]*pushRoute
	parts  int // partition ids cached, all queues
	// pushed counts the calls that went through push_direct.
	pushed atomic.Int64
}

type pushRoute struct {
	queueID, table int32
	parts          map[string]int32 // partition name (never "": "Default") -> id
}

// maxRouteParts bounds the partition ids cached; past it the cache starts
// over (a miss costs one pgque.push and one lookup).
const maxRouteParts = 100_000

// partName is the stored name of an item's partition.
func partName(p string) string {
	if p == "" {
		return "Default"
	}
	return p
}

// direct returns the SQL and arguments of the push_direct call for items,
// or ok false when they are not its shape (several queues, a
// transactionId, an empty payload) or their route is not cached.
func (r *pushRoutes) direct(items []Item, n Notify) (sql string, args []any, ok bool) {
	queue := items[0].Queue
	if queue == "" {
		return "", nil, false
	}
	for _, it := range items {
		if it.Queue != queue || it.TransactionID != "" || len(it.Payload) == 0 {
			return "", nil, false
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.queues[queue]
	if rt == nil {
		return "", nil, false
	}
	pids := make([]int32, len(items))
	payloads := make([]string, len(items))
	for i, it := range items {
		id, found := rt.parts[partName(it.Partition)]
		if !found {
			return "", nil, false
		}
		pids[i] = id
		payloads[i] = string(it.Payload)
	}
	var channel *string
	if n.Channel != "" {
		channel = &n.Channel
	}
	// One pg_notify per call (the items are all of one queue), as the
	// general path's (PostgreSQL folds identical ones).
	sql = fmt.Sprintf(`SELECT r.message_id::text, r.partition_id, pg_current_xact_id()::text::bigint,
	        CASE WHEN $4::text IS NOT NULL AND r.o = 1 THEN pg_notify($4, $5 || $3::text) END
	   FROM pgque.push_direct_q%d_t%d($1::int[], $2::jsonb[], $3::text) WITH ORDINALITY r(message_id, partition_id, o)`,
		rt.queueID, rt.table)
	return sql, []any{pids, payloads, queue, channel, n.Prefix}, true
}

// forget drops queue's route (stale).
func (r *pushRoutes) forget(queue string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt := r.queues[queue]; rt != nil {
		r.parts -= len(rt.parts)
		delete(r.queues, queue)
	}
}

// learn looks up and caches the route of items that are direct's shape
// but whose route (or one of whose partitions) is not cached, after a
// push through pgque.push stored them (the queue and partitions exist).
// A failed lookup only leaves the route uncached.
func (r *pushRoutes) learn(ctx context.Context, q Querier, items []Item) {
	queue := items[0].Queue
	var names []string
	seen := map[string]bool{}
	r.mu.Lock()
	rt := r.queues[queue]
	for _, it := range items {
		if it.Queue != queue || it.TransactionID != "" || len(it.Payload) == 0 {
			r.mu.Unlock()
			return
		}
		name := partName(it.Partition)
		if seen[name] {
			continue
		}
		seen[name] = true
		if rt != nil {
			if _, ok := rt.parts[name]; ok {
				continue
			}
		}
		names = append(names, name)
	}
	r.mu.Unlock()
	if rt != nil && len(names) == 0 {
		return
	}
	var queueID, table int32
	var ids []*int32
	if err := q.QueryRow(ctx, `SELECT queue_id, cur_table, part_ids FROM pgque.push_route($1, $2::text[])`,
		queue, names).Scan(&queueID, &table, &ids); err != nil {
		return // no route (the queue is gone again) or trouble: the next push takes pgque.push
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queues == nil || r.parts+len(names) > maxRouteParts {
		r.queues, r.parts = map[string]*pushRoute{}, 0
	}
	cur := r.queues[queue]
	if cur == nil || cur.queueID != queueID || cur.table != table {
		// new, or the queue / its current table changed: start this queue over
		if cur != nil {
			r.parts -= len(cur.parts)
		}
		cur = &pushRoute{queueID: queueID, table: table, parts: map[string]int32{}}
		r.queues[queue] = cur
		if rt != nil && rt.queueID == queueID {
			for k, v := range rt.parts { // same queue: its partition ids hold
				cur.parts[k] = v
				r.parts++
			}
		}
	}
	for i, name := range names {
		if i < len(ids) && ids[i] != nil {
			if _, ok := cur.parts[name]; !ok {
				r.parts++
			}
			cur.parts[name] = *ids[i]
		}
	}
}

// pushDirect pushes items through their cached route. ok false: not
// pushed (not direct's shape, no route, or a stale one, which is
// forgotten): push them through pgque.push. err: the call failed (nothing
// pushed; no fallback is tried).
func (r *pushRoutes) pushDirect(ctx context.Context, q Querier, items []Item, n Notify) ([]PushResult, bool, error) {
	sql, args, ok := r.direct(items, n)
	if !ok {
		return nil, false, nil
	}
	queue := items[0].Queue
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return r.directFailed(queue, err)
	}
	defer rows.Close()
	out := make([]PushResult, 0, len(items))
	for rows.Next() {
		res := PushResult{Index: len(out), Queue: queue, Status: StatusQueued}
		if err := rows.Scan(&res.MessageID, &res.PartitionID, &res.Txid, new(any)); err != nil {
			return nil, false, wrap("push", err)
		}
		res.TransactionID = res.MessageID
		out = append(out, res)
	}
	if err := rows.Err(); err != nil {
		return r.directFailed(queue, err)
	}
	if len(out) == 0 { // stale route: nothing inserted
		r.forget(queue)
		return nil, false, nil
	}
	if len(out) != len(items) {
		return nil, false, fmt.Errorf("push: %d results for %d items (a bug: report it)", len(out), len(items))
	}
	r.pushed.Add(1)
	return out, true, nil
}

// directFailed: a push_direct call that failed. The function or its table
// gone (the queue dropped since the route was cached) is a stale route:
// forgotten, ok false (push through pgque.push). Anything else is the
// push's error.
func (r *pushRoutes) directFailed(queue string, err error) ([]PushResult, bool, error) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42883" || pgErr.Code == "42P01") {
		r.forget(queue)
		return nil, false, nil
	}
	return nil, false, wrap("push", err)
}
