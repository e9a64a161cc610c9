package sql_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// switchTables makes one event-table switch of queue q (step 1, then step 2
// in its own transaction), ticking and draining consumer c until step 1 may
// run (other tests' transactions can hold tick xmins back for a while).
func (e *engine) switchTables(q, c string) {
	e.t.Helper()
	e.exec(`SELECT pgque.set_queue_config($1, 'rotation_period', '0')`, q)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		e.tick(q)
		if got := e.drain(q, c, 1000); len(got) != 0 {
			e.t.Fatalf("switchTables: drained %d unexpected events", len(got))
		}
		if e.int64(`SELECT pgque.maint_rotate_tables_step1($1)`, q) == 1 {
			e.exec(`SELECT pgque.maint_rotate_tables_step2()`)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatal("maint_rotate_tables_step1 never switched")
}

// rrSendAcrossSwitches: a producer in isolation level iso takes its
// snapshot, the event tables switch n times, a tick, the consumer reads;
// then the producer sends. Returns the send's error (nil: it was sent and
// committed).
func rrSendAcrossSwitches(t *testing.T, e *engine, iso string, switches int, payload string) error {
	return rrAcrossSwitches(t, e, iso, switches, `SELECT pgque.send('q', $1::text)`, payload)
}

// rrAcrossSwitches is rrSendAcrossSwitches with the producer's statement
// given (one parameter: the payload).
func rrAcrossSwitches(t *testing.T, e *engine, iso string, switches int, stmt, payload string) error {
	p := pgtest.Conn(t, e.dsn)
	tx, err := p.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: pgx.TxIsoLevel(iso)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	var one int
	if err := tx.QueryRow(ctxT(t), `SELECT 1`).Scan(&one); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	for i := 0; i < switches; i++ {
		e.switchTables("q", "c")
	}
	e.tick("q")
	if got := e.drain("q", "c", 100); len(got) != 0 {
		t.Fatalf("drained %v before the producer sent", got)
	}
	if _, err := tx.Exec(ctxT(t), stmt, payload); err != nil {
		return err
	}
	return tx.Commit(ctxT(t))
}

// TestBatchRepeatableReadProducerAcrossSwitch: a REPEATABLE READ or
// SERIALIZABLE producer whose snapshot predates a table switch gets a
// retryable 40001 and writes nothing; its retry is delivered exactly once.
// Never silent loss.
func TestBatchRepeatableReadProducerAcrossSwitch(t *testing.T) {
	for _, iso := range []string{"repeatable read", "serializable"} {
		for _, switches := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d switches", iso, switches), func(t *testing.T) {
				e := setup(t)
				e.exec(`SELECT pgque.create_queue('q')`)
				e.exec(`SELECT pgque.subscribe('q', 'c')`)
				err := rrSendAcrossSwitches(t, e, iso, switches, "late")
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "40001" {
					// Sent and committed: it must be delivered.
					e.tick("q")
					got := e.drain("q", "c", 100)
					t.Fatalf("send across %d switch(es) returned %v and %d of 1 event was delivered (pending_events %d); want 40001",
						switches, err, len(got), e.int64(`SELECT pending_events FROM pgque.get_queue_info('q')`))
				}
				e.tick("q")
				if got := e.drain("q", "c", 100); len(got) != 0 {
					t.Fatalf("the refused send delivered %v", got)
				}
				// The retry in a new transaction goes through and is delivered once.
				p := pgtest.Conn(t, e.dsn)
				tx, err := p.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: pgx.TxIsoLevel(iso)})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(ctxT(t), `SELECT pgque.send('q', 'late'::text)`); err != nil {
					t.Fatalf("retry: %v", err)
				}
				if err := tx.Commit(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				e.tick("q")
				exactlyOnce(t, e.drain("q", "c", 100), []string{"late"})
			})
		}
	}
}

// TestBatchRepeatableReadProducerSurvivesTicks: other updates of the queue
// row (forced ticks, configuration) do not fail a REPEATABLE READ producer.
func TestBatchRepeatableReadProducerSurvivesTicks(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	p := pgtest.Conn(t, e.dsn)
	tx, err := p.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t), `SELECT pgque.send('q', 'a'::text)`); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		e.tick("q")
		e.exec(`SELECT pgque.set_queue_config('q', 'ticker_max_count', $1::text)`, fmt.Sprint(100+i))
		if _, err := tx.Exec(ctxT(t), `SELECT pgque.send('q', $1::text)`, fmt.Sprint("b", i)); err != nil {
			t.Fatalf("send %d after a tick and a config change: %v", i, err)
		}
		if _, err := tx.Exec(ctxT(t), `SELECT pgque.send_batch('q', ARRAY[$1])`, fmt.Sprint("c", i)); err != nil {
			t.Fatalf("send_batch %d after a tick and a config change: %v", i, err)
		}
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	e.tick("q")
	exactlyOnce(t, e.drain("q", "c", 100), []string{"a", "b0", "b1", "b2", "b3", "b4", "c0", "c1", "c2", "c3", "c4"})
}

// TestBatchRepeatableReadProducerSpanningSwitch: a REPEATABLE READ producer
// that sent before a switch and sends again after it loses nothing: both
// events are delivered once, or the later send fails with 40001 and nothing
// of the transaction is delivered. A second switch waits for it.
func TestBatchRepeatableReadProducerSpanningSwitch(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	p := pgtest.Conn(t, e.dsn)
	tx, err := p.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	if _, err := tx.Exec(ctxT(t), `SELECT pgque.send('q', 'a'::text)`); err != nil {
		t.Fatal(err)
	}
	e.switchTables("q", "c")
	for i := 0; i < 5; i++ {
		e.tick("q")
		e.drain("q", "c", 100)
		if n := e.int64(`SELECT pgque.maint_rotate_tables_step1('q')`); n != 0 {
			t.Fatal("a second switch ran while a producer that wrote before the first was open")
		}
		e.exec(`SELECT pgque.maint_rotate_tables_step2()`)
	}
	_, err = tx.Exec(ctxT(t), `SELECT pgque.send('q', 'b'::text)`)
	want := []string{"a", "b"}
	var pe *pgconn.PgError
	switch {
	case err == nil:
		if err := tx.Commit(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	case errors.As(err, &pe) && pe.Code == "40001":
		want = nil
	default:
		t.Fatalf("send after the switch: %v", err)
	}
	e.tick("q")
	exactlyOnce(t, e.drain("q", "c", 100), want)
}

// TestPushRepeatableReadProducerAcrossSwitch: the broker's pgque.push called
// by a REPEATABLE READ or SERIALIZABLE producer whose snapshot predates a
// table switch gets a retryable 40001 and writes nothing (its events would
// sit in a table a classic reader no longer reads for its txid); in READ
// COMMITTED the same push goes through and is delivered once.
func TestPushRepeatableReadProducerAcrossSwitch(t *testing.T) {
	const push = `SELECT count(*) FROM pgque.push(ARRAY['q'], NULL, ARRAY[to_jsonb($1::text)], NULL)`
	for _, iso := range []string{"repeatable read", "serializable", "read committed"} {
		for _, switches := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d switches", iso, switches), func(t *testing.T) {
				e := setup(t)
				e.exec(`SELECT pgque.create_queue('q')`)
				e.exec(`SELECT pgque.subscribe('q', 'c')`)
				err := rrAcrossSwitches(t, e, iso, switches, push, "late")
				if iso == "read committed" {
					if err != nil {
						t.Fatalf("push in READ COMMITTED across %d switch(es): %v", switches, err)
					}
					e.tick("q")
					exactlyOnce(t, e.drain("q", "c", 100), []string{`"late"`})
					return
				}
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "40001" {
					e.tick("q")
					got := e.drain("q", "c", 100)
					t.Fatalf("push across %d switch(es) returned %v and %d of 1 event was delivered; want 40001",
						switches, err, len(got))
				}
				e.tick("q")
				if got := e.drain("q", "c", 100); len(got) != 0 {
					t.Fatalf("the refused push delivered %v", got)
				}
			})
		}
	}
}
