package sql_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// A receive() delivery lives in the subscription's unlogged delivery
// sequences, not in its row (docs/design/engine.md, "What ticks and deliveries
// write"). These tests cover what that changes: REPEATABLE READ readers,
// rolled-back receives, crash recovery, upgrades from an install that kept
// the delivery in the row, and the sequences' life cycle.

func deliverySeqs(e *engine) int64 {
	e.t.Helper()
	return e.int64(`SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	                 WHERE n.nspname = 'pgque' AND c.relkind = 'S' AND c.relname LIKE 'delivery\_%'`)
}

// TestDeliveryRepeatableReadReaderAfterAck: a REPEATABLE READ reader whose
// snapshot predates another reader's receive + ack must not read the
// subscription row stale and deliver the acknowledged events again: it
// fails with 40001 and nothing is delivered twice.
func TestDeliveryRepeatableReadReaderAfterAck(t *testing.T) {
	e := setup(t)
	want := e.tickedBatch(10)
	rr := pgtest.Conn(t, e.dsn)
	tx, err := rr.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	var n int64
	if err := tx.QueryRow(ctxT(t), `SELECT count(*) FROM pgque.subscription`).Scan(&n); err != nil { // the snapshot
		t.Fatal(err)
	}
	got := e.drain("q", "c", 100)
	exactlyOnce(t, got, want)
	rows, err := tx.Query(ctxT(t), `SELECT payload FROM pgque.receive('q', 'c', 100)`)
	if err == nil {
		var again []string
		again, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil {
			t.Fatalf("the REPEATABLE READ reader got %d acknowledged events again", len(again))
		}
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "40001" {
		t.Fatalf("REPEATABLE READ receive after another reader's ack: %v, want 40001", err)
	}
}

// TestDeliveryRolledBackReceiveKeepsLease: the delivery is not
// transactional. A receive whose transaction rolls back returned its rows,
// so its lease holds: a second reader is refused, the id can be acked, and
// nothing is lost or delivered twice.
func TestDeliveryRolledBackReceiveKeepsLease(t *testing.T) {
	e := setup(t)
	want := e.tickedBatch(5)
	r := pgtest.Conn(t, e.dsn)
	tx, err := r.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, tx.Conn(), "q", "c", 100)
	if len(got) != 5 {
		t.Fatalf("receive in a transaction: %d events, want 5", len(got))
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if pe := e.sqlErr(`SELECT * FROM pgque.receive('q', 'c', 100)`); pe.Code != "55P03" {
		t.Fatalf("second reader after a rolled-back receive: %s %s, want 55P03", pe.Code, pe.Message)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, got[0].Batch); n != 1 {
		t.Fatalf("ack of the rolled-back receive's id = %d, want 1", n)
	}
	exactlyOnce(t, append(msgPayloads(got), e.drain("q", "c", 100)...), want)
}

// TestDeliveryCurrentBatchInfo: get_consumer_info and get_batch_info show an
// unacknowledged delivery; after its ack it is gone.
func TestDeliveryCurrentBatchInfo(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	e.exec(`SELECT pgque.send_batch('q', $1::text[])`, payloads(3))
	tick := e.tick("q")
	got := e.receive("q", "c", 100)
	if len(got) != 3 {
		t.Fatalf("receive: %d events, want 3", len(got))
	}
	if b := e.int64(`SELECT current_batch FROM pgque.get_consumer_info('q', 'c')`); b != got[0].Batch {
		t.Fatalf("get_consumer_info current_batch = %d, want the delivery %d", b, got[0].Batch)
	}
	if n := e.int64(`SELECT tick_id FROM pgque.get_batch_info($1)`, got[0].Batch); n != tick {
		t.Fatalf("get_batch_info tick_id = %d, want %d", n, tick)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.get_batch_events($1)`, got[0].Batch); n != 3 {
		t.Fatalf("get_batch_events of the delivery: %d rows, want 3", n)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, got[0].Batch); n != 1 {
		t.Fatalf("ack = %d", n)
	}
	if b := e.int64(`SELECT current_batch FROM pgque.get_consumer_info('q', 'c')`); b != -1 {
		t.Fatalf("get_consumer_info current_batch after the ack = %d, want NULL", b)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.get_batch_info($1)`, got[0].Batch); n != 0 {
		t.Fatalf("get_batch_info of an acked delivery: %d rows, want 0", n)
	}
	if n := e.int64(`SELECT pgque.finish_batch($1)`, got[0].Batch); n != 0 {
		t.Fatalf("finish_batch of an acked delivery = %d, want 0", n)
	}
}

// TestDeliverySequencesLifeCycle: subscribing creates the five delivery
// sequences, unsubscribing and drop_queue remove them, moving a consumer
// with a delivery out is refused.
func TestDeliverySequencesLifeCycle(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.create_queue('r')`)
	e.exec(`SELECT pgque.subscribe('q', 'a')`)
	e.exec(`SELECT pgque.subscribe('q', 'b')`)
	e.exec(`SELECT pgque.subscribe('r', 'a')`)
	if n := deliverySeqs(e); n != 15 {
		t.Fatalf("%d delivery sequences for 3 subscriptions, want 15", n)
	}
	e.exec(`SELECT pgque.send('q', 'x'::text)`)
	tick := e.tick("q")
	if got := e.receive("q", "a", 10); len(got) != 1 {
		t.Fatalf("receive: %d events", len(got))
	}
	if pe := e.sqlErr(`SELECT pgque.register_consumer_at('q', 'a', $1)`, tick); pe.Code != "55006" {
		t.Fatalf("moving a consumer with a delivery out: %s %s, want 55006", pe.Code, pe.Message)
	}
	e.exec(`SELECT pgque.unsubscribe('q', 'a')`)
	if n := deliverySeqs(e); n != 10 {
		t.Fatalf("%d delivery sequences after unsubscribe, want 10", n)
	}
	e.exec(`SELECT pgque.drop_queue('q', true)`)
	if n := deliverySeqs(e); n != 5 {
		t.Fatalf("%d delivery sequences after drop_queue, want 5", n)
	}
}

// TestDeliveryUpgradeFromRowDelivery: an install that kept an open
// delivery in the subscription row (sub_batch_recv), upgraded in place: the
// subscription gets its sequences, the delivery's lease still holds, its
// ack still acknowledges it, and nothing is lost or delivered twice.
func TestDeliveryUpgradeFromRowDelivery(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	want := payloads(4)
	e.exec(`SELECT pgque.send_batch('q', $1::text[])`, want)
	tick := e.tick("q")
	// What the earlier receive() left: the delivery in the row, no sequences.
	old := e.int64(`SELECT nextval('pgque.batch_id_seq')`)
	e.exec(`UPDATE pgque.subscription SET sub_batch = $1, sub_next_tick = $2, sub_batch_recv = true, sub_active = clock_timestamp()`, old, tick)
	e.exec(`SELECT pgque.delivery_seqs(sub_id, false) FROM pgque.subscription`)
	if _, err := install.Install(ctxT(t), e.conn, install.Options{Reinstall: true}); err != nil {
		t.Fatalf("reinstall: %v", err)
	}
	if n := deliverySeqs(e); n != 5 {
		t.Fatalf("%d delivery sequences after the upgrade, want 5", n)
	}
	if pe := e.sqlErr(`SELECT * FROM pgque.receive('q', 'c', 100)`); pe.Code != "55P03" {
		t.Fatalf("second reader during the old delivery's lease: %s %s, want 55P03", pe.Code, pe.Message)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, old); n != 1 {
		t.Fatalf("ack of the old delivery = %d, want 1", n)
	}
	if got := e.drain("q", "c", 100); len(got) != 0 {
		t.Fatalf("after acking the old delivery: %d events delivered again", len(got))
	}
	// An expired old delivery is delivered again under a new id; the old
	// id's ack then returns 0.
	e.exec(`SELECT pgque.send_batch('q', $1::text[])`, want)
	tick = e.tick("q")
	old = e.int64(`SELECT nextval('pgque.batch_id_seq')`)
	e.exec(`UPDATE pgque.subscription SET sub_batch = $1, sub_next_tick = $2, sub_batch_recv = true, sub_active = now() - interval '1 hour'`, old, tick)
	got := e.receive("q", "c", 100)
	if len(got) != 4 || got[0].Batch == old {
		t.Fatalf("after the old lease ended: %d events under batch %d (old %d), want 4 under a new id", len(got), got[0].Batch, old)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, old); n != 0 {
		t.Fatalf("late ack of the retired delivery = %d, want 0", n)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, got[0].Batch); n != 1 {
		t.Fatalf("ack of the redelivery = %d, want 1", n)
	}
	exactlyOnce(t, append(msgPayloads(got), e.drain("q", "c", 100)...), want)
}

// TestDeliveryCrashRecovery: crash recovery resets the unlogged delivery
// sequences; an unacknowledged delivery is delivered again under a new id
// (at-least-once) and the old id's ack returns 0. Runs on a private cluster
// (a killed backend makes the whole cluster restart).
func TestDeliveryCrashRecovery(t *testing.T) {
	t.Parallel()
	c := pgtest.PrivateCluster(t)
	dsn := c.DSN("postgres")
	pgtest.InstallEngine(t, dsn)
	e := &engine{t: t, dsn: dsn, conn: pgtest.Conn(t, dsn)}
	if e.int64(`SELECT current_setting('server_version_num')::int`) < 150000 {
		t.Skip("delivery sequences are logged before PostgreSQL 15")
	}
	want := e.tickedBatch(3)
	first := e.receive("q", "c", 100)
	if len(first) != 3 {
		t.Fatalf("receive: %d events", len(first))
	}
	// Crash: SIGKILL of a backend makes the postmaster reinitialize. It
	// accepts connections until it has reaped the killed backend, so a
	// connection that answers may still be one the reinitialization kills
	// (CI: "receive: unexpected EOF" on the next query). The crash is over
	// once the checkpointer, which the reinitialization restarts, has a new
	// pid.
	ckpt := e.int64(`SELECT pid FROM pg_catalog.pg_stat_activity WHERE backend_type = 'checkpointer'`)
	pid := e.int64(`SELECT pg_backend_pid()`)
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var conn *pgx.Conn
	for deadline := time.Now().Add(60 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cn, err := pgx.Connect(ctx, dsn)
		cancel()
		if err == nil {
			var now int64
			err = cn.QueryRow(ctxT(t), `SELECT coalesce((SELECT pid FROM pg_catalog.pg_stat_activity WHERE backend_type = 'checkpointer'), 0)`).Scan(&now)
			if err == nil && now != 0 && now != ckpt {
				conn = cn
				break
			}
			if err == nil {
				err = fmt.Errorf("the checkpointer is still pid %d: the crash is not processed yet", now)
			}
			_ = cn.Close(context.Background())
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not back 60 s after the crash: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	e.conn = conn
	again := e.receive("q", "c", 100)
	if len(again) != 3 || again[0].Batch == first[0].Batch {
		t.Fatalf("after the crash: %d events under batch %d (first %d), want 3 under a new id", len(again), again[0].Batch, first[0].Batch)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, first[0].Batch); n != 0 {
		t.Fatalf("ack of the pre-crash delivery = %d, want 0", n)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, again[0].Batch); n != 1 {
		t.Fatalf("ack of the redelivery = %d, want 1", n)
	}
	exactlyOnce(t, append(msgPayloads(again), e.drain("q", "c", 100)...), want)
}

// TestDeliveryNextBatchReturnsOpenDelivery: next_batch() while a receive()
// delivery is out returns that delivery (as when the row held it), and
// next_batch_info its ticks; finishing it finishes the delivery.
func TestDeliveryNextBatchReturnsOpenDelivery(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	want := payloads(3)
	e.exec(`SELECT pgque.send_batch('q', $1::text[])`, want)
	tick := e.tick("q")
	got := e.receive("q", "c", 100)
	if len(got) != 3 {
		t.Fatalf("receive: %d events", len(got))
	}
	if b := e.int64(`SELECT pgque.next_batch('q', 'c')`); b != got[0].Batch {
		t.Fatalf("next_batch = %d, want the open delivery %d", b, got[0].Batch)
	}
	if n := e.int64(`SELECT cur_tick_id FROM pgque.next_batch_info('q', 'c')`); n != tick {
		t.Fatalf("next_batch_info cur_tick_id = %d, want %d", n, tick)
	}
	if n := e.int64(`SELECT pgque.finish_batch($1)`, got[0].Batch); n != 1 {
		t.Fatalf("finish_batch of the delivery = %d, want 1", n)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, got[0].Batch); n != 0 {
		t.Fatalf("ack after finish_batch = %d, want 0", n)
	}
	e.tick("q")
	if more := e.drain("q", "c", 100); len(more) != 0 {
		t.Fatalf("after finishing the delivery: %d events again", len(more))
	}
}
