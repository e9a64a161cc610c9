package broker_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// TestEmptyPopWritesNothing: once a group is subscribed and its cursors
// seeded, a pop that finds nothing to deliver - every entry point
// (pop_list, pop_any, pop_partition, pop_by_label), queue mode and a named
// group, a drained partition and one under a live lease - assigns no
// transaction id (checked at the end of the pop inside an explicit
// transaction) and writes no WAL (EXPLAIN (ANALYZE, WAL) of the same call,
// this backend's own records). The first contact may write.
func TestEmptyPopWritesNothing(t *testing.T) {
	e := setup(t)
	ns := "emptyns"
	if _, err := broker.Configure(ctxT(t), e.conn, "q", &ns, nil, nil); err != nil {
		t.Fatalf("configure: %v", err)
	}
	e.pushN("q", "p1", 0, 3)
	e.pushN("q", "p2", 0, 3)
	e.pushN("q", "held", 0, 3)
	e.tick("q")
	var ids []int32
	rows, err := e.conn.Query(ctxT(t), `SELECT p.part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue
	                                    WHERE q.queue_name = 'q' AND p.part_name IN ('p1', 'p2') ORDER BY p.part_id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(ids) != 2 {
		t.Fatalf("partition ids %v: %v", ids, err)
	}
	for _, g := range []string{"", "g"} {
		// drain p1 and p2 (acked), lease "held" and keep its lease live
		for _, part := range []string{"p1", "p2"} {
			r := e.pop(broker.Pop{Queue: "q", Group: g, Batch: 10}, part)
			if len(r.Messages) != 3 {
				t.Fatalf("group %q partition %s: %d messages, want 3", g, part, len(r.Messages))
			}
			acks := make([]broker.Ack, len(r.Messages))
			for i, m := range r.Messages {
				acks[i] = ackOf(m, "completed")
			}
			e.ack(g, acks...)
		}
		if r := e.pop(broker.Pop{Queue: "q", Group: g, Batch: 10, LeaseSeconds: 3600}, "held"); len(r.Messages) != 3 {
			t.Fatalf("group %q: %d messages of held, want 3", g, len(r.Messages))
		}
	}

	type call struct {
		name  string
		sql   string // the same call in SQL, for EXPLAIN (ANALYZE, WAL)
		args  []any
		pop   func(ctx context.Context, q broker.Querier) (broker.PopResult, error)
		wantV map[string]string // partition name -> verdict ("" = not checked)
	}
	var calls []call
	for _, g := range []string{"", "g"} {
		p := broker.Pop{Queue: "q", Group: g, Batch: 10}
		grp := g
		if grp == "" {
			grp = broker.QueueMode
		}
		calls = append(calls,
			call{name: "pop_list/" + grp, sql: `SELECT * FROM pgque.pop_list('q', $1, $2::int[], 10)`, args: []any{grp, ids},
				pop: func(ctx context.Context, q broker.Querier) (broker.PopResult, error) {
					return broker.PopList(ctx, q, p, ids)
				}, wantV: map[string]string{"p1": broker.VerdictEmpty, "p2": broker.VerdictEmpty}},
			call{name: "pop_any/" + grp, sql: `SELECT * FROM pgque.pop_any('q', $1, 10)`, args: []any{grp},
				pop: func(ctx context.Context, q broker.Querier) (broker.PopResult, error) {
					return broker.PopAny(ctx, q, p)
				}},
			call{name: "pop_partition/" + grp, sql: `SELECT * FROM pgque.pop_partition('q', 'p1', $1, 10)`, args: []any{grp},
				pop: func(ctx context.Context, q broker.Querier) (broker.PopResult, error) {
					return broker.PopPartition(ctx, q, p, "p1")
				}, wantV: map[string]string{"p1": broker.VerdictEmpty}},
			call{name: "pop_partition_leased/" + grp, sql: `SELECT * FROM pgque.pop_partition('q', 'held', $1, 10)`, args: []any{grp},
				pop: func(ctx context.Context, q broker.Querier) (broker.PopResult, error) {
					return broker.PopPartition(ctx, q, p, "held")
				}, wantV: map[string]string{"held": broker.VerdictLeased}},
			call{name: "pop_by_label/" + grp, sql: `SELECT * FROM pgque.pop_by_label($2, NULL, $1, 10)`, args: []any{grp, ns},
				pop: func(ctx context.Context, q broker.Querier) (broker.PopResult, error) {
					_, res, err := broker.PopByLabel(ctx, q, ns, "", p)
					return res, err
				}},
		)
	}
	// warm-up: first contact of every call (page pruning of the cursors'
	// dead versions may write once, too)
	for _, c := range calls {
		if _, err := c.pop(ctxT(t), e.conn); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	for round := 0; round < 5; round++ {
		for _, c := range calls {
			ctx := ctxT(t)
			tx, err := e.conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.pop(ctx, tx)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var xid *string
			if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&xid); err != nil {
				t.Fatal(err)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if len(res.Messages) != 0 {
				t.Fatalf("%s: %d messages from a drained queue", c.name, len(res.Messages))
			}
			for _, v := range res.Verdicts {
				if want, ok := c.wantV[v.Partition]; ok && v.Kind != want {
					t.Fatalf("%s: verdict %+v, want %s", c.name, v, want)
				}
			}
			if c.wantV != nil && len(res.Verdicts) != len(c.wantV) {
				t.Fatalf("%s: verdicts %+v, want %v", c.name, res.Verdicts, c.wantV)
			}
			if xid != nil {
				t.Errorf("round %d %s: an empty pop assigned transaction id %s (it wrote)", round, c.name, *xid)
			}
			if n := e.walRecords(c.sql, c.args...); n != 0 {
				t.Errorf("round %d %s: an empty pop wrote %d WAL records", round, c.name, n)
			}
		}
	}
}

// walRecords runs sql under EXPLAIN (ANALYZE, WAL) and returns the WAL
// records it wrote (this backend's, nested function calls included).
func (e *env) walRecords(sql string, args ...any) int64 {
	e.t.Helper()
	var raw []byte
	if err := e.conn.QueryRow(ctxT(e.t), `EXPLAIN (ANALYZE, WAL, FORMAT JSON) `+sql, args...).Scan(&raw); err != nil {
		e.t.Fatalf("explain %s: %v", sql, err)
	}
	var out []struct {
		Plan struct {
			WALRecords int64 `json:"WAL Records"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		e.t.Fatalf("explain %s: %s: %v", sql, raw, err)
	}
	return out[0].Plan.WALRecords
}
