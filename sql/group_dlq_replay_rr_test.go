package sql_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// groupItem is one message popped by a consumer group.
type groupItem struct {
	txn, part, lease, payload string
}

// popGroup pops (leases) up to 10 messages of partition p of queue q in
// group g.
func (e *engine) popGroup(q, g string) []groupItem {
	e.t.Helper()
	rows, err := e.conn.Query(ctxT(e.t), `SELECT transaction_id, partition_uuid::text, lease_id::text, payload
	    FROM pgque.pop_list($1, $2, ARRAY(SELECT part_id FROM pgque.partition WHERE part_name = 'p'), 10, 1)
	   WHERE message_id IS NOT NULL`, q, g)
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (groupItem, error) {
		var it groupItem
		err := r.Scan(&it.txn, &it.part, &it.lease, &it.payload)
		return it, err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// ackGroup acks one popped message of group g with status (NULL: completed)
// and fails the test unless the ack succeeded.
func (e *engine) ackGroup(g string, it groupItem, status any) {
	e.t.Helper()
	if n := e.int64(`SELECT count(*) FILTER (WHERE success) FROM pgque.group_ack($1, ARRAY[$2], ARRAY[$3::uuid], ARRAY[$4::text], ARRAY[$5::uuid], NULL)`,
		g, it.txn, it.part, status, it.lease); n != 1 {
		e.t.Fatalf("ack of %s (status %v) did not succeed", it.txn, status)
	}
}

// drainGroup pops and completes messages of group g until a pop returns
// nothing; returns their transaction ids.
func (e *engine) drainGroup(q, g string) []string {
	e.t.Helper()
	var got []string
	for i := 0; i < 100; i++ {
		items := e.popGroup(q, g)
		if len(items) == 0 {
			return got
		}
		for _, it := range items {
			got = append(got, it.txn)
			e.ackGroup(g, it, nil)
		}
	}
	e.t.Fatal("drainGroup did not finish in 100 rounds")
	return nil
}

// TestGroupDLQReplayRepeatableReadAcrossSwitch: pgque.group_dlq_replay
// called by a REPEATABLE READ or SERIALIZABLE transaction whose snapshot
// predates one or two event-table switches gets a retryable 40001 and
// changes nothing (the dead letter stays). Without that check the replayed
// event went into the table the stale snapshot names as current: after two
// switches the oldest one, which a group's claims (current and previous
// table) never read, so the replayed message was lost. The retry in a new
// transaction replays it and the group receives it exactly once; in READ
// COMMITTED the replay goes through at once.
func TestGroupDLQReplayRepeatableReadAcrossSwitch(t *testing.T) {
	const replay = `SELECT count(*) FROM pgque.group_dlq_replay($1::text::bigint)`
	for _, iso := range []string{"repeatable read", "serializable", "read committed"} {
		for _, switches := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d switches", iso, switches), func(t *testing.T) {
				e := setup(t)
				e.exec(`SELECT count(*) FROM pgque.configure_queue('q', NULL, NULL, '{"retryLimit": 0, "deadLetterQueue": true}'::jsonb)`)
				// A classic consumer, so switchTables can tick and drain.
				e.exec(`SELECT pgque.subscribe('q', 'c')`)
				e.exec(`SELECT count(*) FROM pgque.push(ARRAY['q'], ARRAY['p'], ARRAY['"m"']::jsonb[], ARRAY['tx-m'])`)
				e.tick("q")
				e.drain("q", "c", 100) // the classic consumer may see the push: not the subject here

				items := e.popGroup("q", "g")
				if len(items) != 1 || items[0].txn != "tx-m" {
					t.Fatalf("group g popped %v, want tx-m", items)
				}
				e.ackGroup("g", items[0], "failed") // retryLimit 0: dead-lettered at once
				dead := func() string {
					t.Helper()
					var s string
					if err := e.conn.QueryRow(ctxT(t), `SELECT coalesce(string_agg(gdl_id || '/' || gdl_txn, ';' ORDER BY gdl_id), '')
					    FROM pgque.group_dead_letter`).Scan(&s); err != nil {
						t.Fatal(err)
					}
					return s
				}
				var gdl int64
				if err := e.conn.QueryRow(ctxT(t), `SELECT gdl_id FROM pgque.group_dead_letter WHERE gdl_txn = 'tx-m'`).Scan(&gdl); err != nil {
					t.Fatalf("the failed ack did not dead-letter tx-m (dead letters %q): %v", dead(), err)
				}
				if got := e.drainGroup("q", "g"); len(got) != 0 {
					t.Fatalf("group g popped %v after the dead-lettering, want nothing", got)
				}
				before := dead()

				err := rrAcrossSwitches(t, e, iso, switches, replay, fmt.Sprint(gdl))
				if iso == "read committed" {
					if err != nil {
						t.Fatalf("group_dlq_replay in READ COMMITTED across %d switch(es): %v", switches, err)
					}
					if d := dead(); d != "" {
						t.Fatalf("dead letters after the replay: %q, want none", d)
					}
					exactlyOnce(t, e.drainGroup("q", "g"), []string{"tx-m"})
					return
				}
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "40001" {
					got := e.drainGroup("q", "g")
					t.Fatalf("group_dlq_replay across %d switch(es) returned %v; group g then popped %v (want tx-m once), dead letters %q; want 40001",
						switches, err, got, dead())
				}
				if d := dead(); d != before {
					t.Fatalf("dead letters after the refused replay: %q, want %q (unchanged)", d, before)
				}
				if got := e.drainGroup("q", "g"); len(got) != 0 {
					t.Fatalf("the refused replay delivered %v", got)
				}

				// The retry in a new transaction replays it; g receives it once.
				p := pgtest.Conn(t, e.dsn)
				tx, err := p.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: pgx.TxIsoLevel(iso)})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(ctxT(t)) }()
				var n int64
				if err := tx.QueryRow(ctxT(t), replay, fmt.Sprint(gdl)).Scan(&n); err != nil || n != 1 {
					t.Fatalf("retried replay: %d rows, %v; want 1", n, err)
				}
				if err := tx.Commit(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				if d := dead(); d != "" {
					t.Fatalf("dead letters after the retried replay: %q, want none", d)
				}
				exactlyOnce(t, e.drainGroup("q", "g"), []string{"tx-m"})
			})
		}
	}
}
