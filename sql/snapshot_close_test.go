package sql_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// heldPush pushes payload to partition p of queue q in a producer
// transaction it leaves open (rolled back when the test ends unless the
// test commits it).
func (e *engine) heldPush(q, p, payload string) pgx.Tx {
	e.t.Helper()
	tx, err := pgtest.Conn(e.t, e.dsn).Begin(ctxT(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctxT(e.t), `SELECT pgque.push(ARRAY[$1], ARRAY[$2], ARRAY[$3::jsonb], NULL)`, q, p, payload); err != nil {
		e.t.Fatal(err)
	}
	return tx
}

// claimPayloads runs one auto-ack pop_list of group g over partition p of
// queue q and returns the payloads it took, in order.
func (e *engine) claimPayloads(q, g, p string, batch int) []string {
	e.t.Helper()
	rows, err := e.conn.Query(ctxT(e.t), `SELECT l.payload FROM pgque.pop_list($1, $2,
		ARRAY(SELECT pt.part_id FROM pgque.partition pt JOIN pgque.queue qu ON qu.queue_id = pt.part_queue
		       WHERE qu.queue_name = $1 AND pt.part_name = $3), $4, 1, NULL, true) l
		WHERE l.message_id IS NOT NULL`, q, g, p, batch)
	if err != nil {
		e.t.Fatalf("pop_list: %v", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatalf("pop_list: %v", err)
	}
	return out
}

// A claim closes its cursor's next range at its own snapshot: an event of
// a transaction still in flight at the claim is in that snapshot's xip, so
// it belongs to the next range and is served by a later claim - exactly
// once, in (ev_txid, ev_id) order - although a later transaction's event
// (larger txid, committed first) was served before it. No tick is made
// anywhere in this test (no ticker runs): a committed push is claimable at
// once.
func TestClaimRangeKeepsEventsOfTransactionsInFlight(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.push(ARRAY['q'], ARRAY['p'], ARRAY['0'::jsonb], NULL)`)
	ticks := e.int64(`SELECT count(*) FROM pgque.tick`)
	if got := e.claimPayloads("q", "g", "p", 10); !slices.Equal(got, []string{"0"}) {
		t.Fatalf("first claim: %v, want [0] (a committed push is claimable without a tick)", got)
	}

	// A producer holds its insert open across the next claim.
	ctx := ctxT(t)
	tx := e.heldPush("q", "p", "1")
	e.exec(`SELECT pgque.push(ARRAY['q'], ARRAY['p'], ARRAY['2'::jsonb], NULL)`)
	if got := e.claimPayloads("q", "g", "p", 10); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("claim with event 1 in flight: %v, want [2]", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.exec(`SELECT pgque.push(ARRAY['q'], ARRAY['p'], ARRAY['3'::jsonb], NULL)`)
	if got := e.claimPayloads("q", "g", "p", 10); !slices.Equal(got, []string{"1", "3"}) {
		t.Fatalf("claim after the producer committed: %v, want [1 3] (the event of the transaction in flight at the last claim, then the newer one)", got)
	}
	if got := e.claimPayloads("q", "g", "p", 10); len(got) != 0 {
		t.Fatalf("claim after everything was taken: %v, want nothing (exactly once)", got)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.tick`); n != ticks {
		t.Fatalf("ticks: %d -> %d, want none made", ticks, n)
	}
}

// group_advance_idle moves idle cursors to the current snapshot so they do
// not pin rotation, but never moves a range end back: a cursor whose hi is
// later than that snapshot (a claim that committed after it was taken
// closed its range at its own, later snapshot; here a snapshot from the
// future stands in for it) is left alone - reset to the older snapshot, it
// would be served again what it consumed in between. An idle cursor with
// an older hi is advanced.
func TestAdvanceIdleNeverMovesARangeEndBack(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.push(ARRAY['q'], ARRAY['p'], ARRAY['0'::jsonb], NULL)`)
	for _, g := range []string{"ahead", "idle"} {
		if got := e.claimPayloads("q", g, "p", 10); !slices.Equal(got, []string{"0"}) {
			t.Fatalf("group %s: claim %v, want [0]", g, got)
		}
	}
	// Some transactions, so the current snapshot's xmin passes the cursors'.
	for i := range 3 {
		e.exec(fmt.Sprintf(`SELECT pgque.push(ARRAY['q'], ARRAY['other'], ARRAY['%d'::jsonb], NULL)`, i))
	}
	future := e.int64(`SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`) + 1000
	e.exec(`UPDATE pgque.group_cursor gc SET gc_hi = $1::text::pg_snapshot
		  FROM pgque.broker_group g WHERE g.grp_id = gc.gc_group AND g.grp_name = 'ahead'`,
		fmt.Sprintf("%d:%d:", future, future))
	cursor := func(g string) string {
		t.Helper()
		var s string
		if err := e.conn.QueryRow(ctxT(t), `SELECT gc.gc_lo::text || ' ' || gc.gc_hi::text || ' ' || coalesce(gc.gc_pos::text, '-')
			  FROM pgque.group_cursor gc JOIN pgque.broker_group g ON g.grp_id = gc.gc_group
			  JOIN pgque.partition pt ON pt.part_queue = gc.gc_queue AND pt.part_id = gc.gc_partition
			 WHERE g.grp_name = $1 AND pt.part_name = 'p'`, g).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	aheadBefore, idleBefore := cursor("ahead"), cursor("idle")
	e.exec(`SELECT pgque.group_advance_idle(queue_id) FROM pgque.queue WHERE queue_name = 'q'`)
	if got := cursor("ahead"); got != aheadBefore {
		t.Fatalf("cursor with a later range end: %s -> %s, want it left alone (never back)", aheadBefore, got)
	}
	if got := cursor("idle"); got == idleBefore {
		t.Fatalf("idle cursor not advanced: %s", got)
	}
}

// A claim never serves a range whose end is later than its own snapshot: a
// claim that committed after this one's snapshot (the newest row version,
// which FOR UPDATE locks) may have closed the range at a later snapshot,
// and read with this one an event of a transaction that committed in
// between is invisible and would be passed over for good. Here a range
// end that sees a producer's transaction still in flight (the producer's
// own snapshot) stands in for it: the claim leaves the cursor ('leased', a
// retry soon) instead of serving the newer event past the held one; once
// the producer committed, the next claim serves both, in order.
func TestClaimSkipsRangeEndLaterThanItsSnapshot(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.push(ARRAY['q'], ARRAY['p'], ARRAY['0'::jsonb], NULL)`)
	if got := e.claimPayloads("q", "g", "p", 10); !slices.Equal(got, []string{"0"}) {
		t.Fatalf("first claim: %v, want [0]", got)
	}
	ctx := ctxT(t)
	tx := e.heldPush("q", "p", "1")
	e.exec(`SELECT pgque.push(ARRAY['q'], ARRAY['p'], ARRAY['2'::jsonb], NULL)`)
	// hi: the producer's own snapshot, taken now - it sees event 2 and,
	// being its own, the producer's transaction (not in its xip), as a
	// snapshot taken after the producer's commit would
	var later string
	if err := tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&later); err != nil {
		t.Fatal(err)
	}
	e.exec(`UPDATE pgque.group_cursor gc SET gc_lo = gc.gc_hi, gc_hi = $1::text::pg_snapshot`, later)
	var verdict string
	if err := e.conn.QueryRow(ctx, `SELECT string_agg(coalesce(l.payload, l.verdict), ',') FROM pgque.pop_list('q', 'g',
		ARRAY(SELECT part_id FROM pgque.partition WHERE part_name = 'p'), 10, 1, NULL, true) l`).Scan(&verdict); err != nil {
		t.Fatal(err)
	}
	if verdict != "leased" {
		t.Fatalf("claim of a range ending after its snapshot: %q, want leased (nothing served)", verdict)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.claimPayloads("q", "g", "p", 10); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("claim after the producer committed: %v, want [1 2]", got)
	}
}
