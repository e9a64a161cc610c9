package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/db"
)

// ackRoutes caches, per (tenant scope, consumer group, partition UUID),
// what an ack needs to skip pgque.group_ack: the queue's id, name and
// current event table, the partition's id and the group's id. With them
// the common ack - completed, all on one partition, under one lease id or
// none - is one call of the queue's generated
// pgque.ack_direct_q<id>_t<table> (group_ack's fast path, planned once per
// connection). Stale (the queue dropped or recreated, its event tables
// switched), that call writes nothing and says so (a row with idx -1): the
// route is forgotten and looked up again (pgque.ack_route) after the ack
// went through pgque.group_ack. Not the fast path's case (no row): the ack
// goes through pgque.group_ack too. Safe for concurrent use.
type ackRoutes struct {
	mu     sync.Mutex
	routes map[ackRouteKey]ackRoute
	// acked counts the statements answered by ack_direct.
	acked atomic.Int64
}

type ackRouteKey struct {
	scope     Scope
	group     string
	partition string
}

type ackRoute struct {
	queueID, partID, table, groupID int32
	queue                           string
}

// maxAckRoutes bounds the routes cached; past it the cache starts over.
const maxAckRoutes = 100_000

// ackDirectShape returns the route key of acks when they are the fast
// path's shape: every ack completed (no status or completed / success /
// acked / ok), named by a transactionId, all of one partition (a UUID),
// under one lease id or none.
func ackDirectShape(scope Scope, group string, acks []Ack) (ackRouteKey, bool) {
	if len(acks) == 0 || !isUUID(acks[0].PartitionID) {
		return ackRouteKey{}, false
	}
	p, lease := acks[0].PartitionID, acks[0].LeaseID
	for _, a := range acks {
		switch a.Status {
		case "", "completed", "success", "acked", "ok":
		default:
			return ackRouteKey{}, false
		}
		if a.PartitionID != p || a.LeaseID != lease || a.TransactionID == "" {
			return ackRouteKey{}, false
		}
	}
	return ackRouteKey{scope, group, p}, true
}

// direct returns the ack_direct call for acks, or ok false (not its shape,
// no route cached).
func (r *ackRoutes) direct(scope Scope, group string, acks []Ack) (sql string, args []any, k ackRouteKey, ok bool) {
	k, ok = ackDirectShape(scope, group, acks)
	if !ok {
		return "", nil, k, false
	}
	r.mu.Lock()
	rt, ok := r.routes[k]
	r.mu.Unlock()
	if !ok {
		return "", nil, k, false
	}
	txns := make([]string, len(acks))
	for i, a := range acks {
		txns[i] = a.TransactionID
	}
	var lease *string
	if acks[0].LeaseID != "" {
		lease = uuidOrZero(acks[0].LeaseID)
	}
	sql = fmt.Sprintf(`SELECT idx, transaction_id, success, error, lease_released, dlq, noop, queue_name, partition_id, redeliver
		FROM pgque.ack_direct_q%d_t%d($1::text[], $2::int, $3::int, $4::uuid, $5::text)`, rt.queueID, rt.table)
	return sql, []any{txns, rt.groupID, rt.partID, lease, rt.queue}, k, true
}

func (r *ackRoutes) forget(k ackRouteKey) {
	r.mu.Lock()
	delete(r.routes, k)
	r.mu.Unlock()
}

// learn looks up and caches the route of k (after its acks went through
// pgque.group_ack). A failed lookup only leaves it uncached.
func (r *ackRoutes) learn(ctx context.Context, db BatchQuerier, k ackRouteKey) {
	r.mu.Lock()
	_, ok := r.routes[k]
	r.mu.Unlock()
	if ok {
		return
	}
	var rt ackRoute
	b := &pgx.Batch{}
	b.Queue(`SELECT queue_id, part_id, cur_table, queue_name, group_id FROM pgque.ack_route($1, $2::uuid, $3)`,
		k.group, k.partition, k.scope.arg())
	br := db.SendBatch(ctx, b)
	err := br.QueryRow().Scan(&rt.queueID, &rt.partID, &rt.table, &rt.queue, &rt.groupID)
	if cerr := br.Close(); err != nil || cerr != nil {
		return
	}
	r.mu.Lock()
	if r.routes == nil || len(r.routes) >= maxAckRoutes {
		r.routes = map[ackRouteKey]ackRoute{}
	}
	r.routes[k] = rt
	r.mu.Unlock()
}

// ackDirect acks acks of group in scope through their cached route, in a
// transaction of their own (the caller's statement alone). ok false: not
// acked (not the shape, no route, a stale one - forgotten -, or not the
// fast path's case; nothing was written): ack them through
// pgque.group_ack. err: the call failed.
func (r *ackRoutes) ackDirect(ctx context.Context, db BatchQuerier, scope Scope, group string, acks []Ack) ([]AckResult, bool, error) {
	sql, args, k, ok := r.direct(scope, group, acks)
	if !ok {
		return nil, false, nil
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := db.SendBatch(ctx, b)
	rows, err := br.Query()
	var out []AckResult
	if err == nil {
		out, err = scanAcksDirect(rows, len(acks))
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42883" || pgErr.Code == "42P01") {
			r.forget(k) // the queue is gone: its function too
			return nil, false, nil
		}
		return nil, false, wrap("ack", err)
	}
	switch {
	case out == nil: // not the fast path's case: nothing written
		return nil, false, nil
	case len(out) == 1 && out[0].Index == -1: // stale route: nothing written
		r.forget(k)
		return nil, false, nil
	}
	r.acked.Add(1)
	return out, true, nil
}

// scanAcksDirect reads ack_direct's rows: none, the stale route's one row
// (idx -1), or scanAcks' n rows.
func scanAcksDirect(rows pgx.Rows, n int) ([]AckResult, error) {
	defer rows.Close()
	var out []AckResult
	for rows.Next() {
		var r AckResult
		var txn, e, queue *string
		var pid *int32
		if err := rows.Scan(&r.Index, &txn, &r.Success, &e, &r.LeaseReleased, &r.DLQ, &r.Noop, &queue, &pid, &r.Redeliver); err != nil {
			return nil, err
		}
		if r.Index == -1 && len(out) == 0 {
			out = append(out, r)
			continue
		}
		if r.Index != len(out) {
			return nil, fmt.Errorf("ack_direct row %d has index %d (a bug: report it)", len(out), r.Index)
		}
		r.TransactionID, r.Error, r.Queue, r.PartitionID = db.Deref(txn), db.Deref(e), db.Deref(queue), -1
		if pid != nil {
			r.PartitionID = *pid
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) > 0 && !(len(out) == 1 && out[0].Index == -1) && len(out) != n {
		return nil, fmt.Errorf("ack_direct: %d results for %d items (a bug: report it)", len(out), n)
	}
	return out, nil
}
