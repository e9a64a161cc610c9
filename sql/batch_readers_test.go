package sql_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// tryReceive is receive that returns the PostgreSQL error instead of failing.
func tryReceive(ctx context.Context, conn *pgx.Conn, q, c string, max int) ([]msg, error) {
	rows, err := conn.Query(ctx, `SELECT msg_id, batch_id, payload, retry_count FROM pgque.receive($1, $2, $3)`, q, c, max)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (msg, error) {
		var m msg
		err := r.Scan(&m.ID, &m.Batch, &m.Payload, &m.Retry)
		return m, err
	})
}

func isBusy(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// TestBatchSecondReaderIsRefused: two connections on one consumer name.
// The second receive is refused (55P03) while the first delivery is not
// acknowledged, so nothing is delivered twice and nothing skipped.
func TestBatchSecondReaderIsRefused(t *testing.T) {
	e := setup(t)
	want := e.tickedBatch(20)
	w1 := pgtest.Conn(t, e.dsn)
	w2 := pgtest.Conn(t, e.dsn)

	var got []string
	a, err := tryReceive(ctxT(t), w1, "q", "c", 7)
	if err != nil || len(a) != 7 {
		t.Fatalf("worker 1 receive: %d events, %v", len(a), err)
	}
	got = append(got, msgPayloads(a)...)
	b, err := tryReceive(ctxT(t), w2, "q", "c", 7)
	if !isBusy(err) {
		t.Fatalf("worker 2 receive while worker 1's delivery is open: %d events (%v), err %v; want SQLSTATE 55P03", len(b), msgPayloads(b), err)
	}
	if !strings.Contains(err.Error(), "unacknowledged delivery") {
		t.Fatalf("refusal is not clear: %v", err)
	}
	if n := queryInt(t, w1, `SELECT pgque.ack($1)`, a[0].Batch); n != 1 {
		t.Fatalf("worker 1 ack = %d", n)
	}
	for _, w := range []*pgx.Conn{w2, w1, w2} {
		ms, err := tryReceive(ctxT(t), w, "q", "c", 7)
		if err != nil {
			t.Fatalf("receive after the ack: %v", err)
		}
		got = append(got, msgPayloads(ms)...)
		if len(ms) > 0 && queryInt(t, w, `SELECT pgque.ack($1)`, ms[0].Batch) != 1 {
			t.Fatal("ack failed")
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("delivered %v, want m1..m20 once each in order", got)
	}
}

// TestBatchLeaseEndsForADeadReader: a reader that never acks does not wedge
// the consumer: after the lease the events are delivered again under a new
// batch id, and the dead reader's late ack / nack do nothing.
func TestBatchLeaseEndsForADeadReader(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_queue_config('q', 'lease_time', '5')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	want := payloads(10)
	e.exec(`SELECT pgque.send_batch('q', $1::text[])`, want)
	e.tick("q")
	dead := pgtest.Conn(t, e.dsn)
	start := time.Now()
	a, err := tryReceive(ctxT(t), dead, "q", "c", 4)
	if err != nil || len(a) != 4 {
		t.Fatalf("receive: %d, %v", len(a), err)
	}
	received := time.Now() // the lease started at or before this
	if _, err := tryReceive(ctxT(t), e.conn, "q", "c", 100); !isBusy(err) {
		t.Fatalf("receive inside the lease: %v, want 55P03", err)
	}
	if time.Since(start) >= 5*time.Second {
		t.Fatal("the machine is too slow to test inside a 5 s lease")
	}
	time.Sleep(time.Until(received.Add(5300 * time.Millisecond)))
	b := e.receive("q", "c", 100)
	if strings.Join(msgPayloads(b), ",") != strings.Join(want, ",") {
		t.Fatalf("after the lease: %v, want m1..m10", msgPayloads(b))
	}
	if b[0].Batch == a[0].Batch {
		t.Fatal("the redelivery reuses the dead reader's batch id")
	}
	if n := queryInt(t, dead, `SELECT pgque.ack($1)`, a[0].Batch); n != 0 {
		t.Fatalf("the dead reader's late ack = %d, want 0", n)
	}
	if _, err := dead.Exec(ctxT(t), `SELECT pgque.nack($1, ROW($2, $1, 'default', 'm1', 0, now(), NULL, NULL, NULL, NULL)::pgque.message)`, a[0].Batch, a[0].ID); err == nil || !strings.Contains(err.Error(), "batch not found") {
		t.Fatalf("the dead reader's late nack: %v, want batch not found", err)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, b[0].Batch); n != 1 {
		t.Fatalf("ack of the redelivery = %d", n)
	}
	e.tick("q")
	if more := e.receive("q", "c", 100); len(more) != 0 {
		t.Fatalf("after the ack: %d more events", len(more))
	}
}

// TestBatchTwoWorkersOneConsumer: two workers loop receive / ack (separate
// transactions) on one consumer name while a producer sends and a ticker
// ticks: every event is delivered exactly once (lost = 0, duplicates = 0).
func TestBatchTwoWorkersOneConsumer(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	const total = 3000
	ctx, cancel := context.WithTimeout(ctxT(t), 90*time.Second)
	defer cancel()

	var (
		mu       sync.Mutex
		got      = map[string]int{}
		refused  int
		badAcks  int // acks of a delivery that returned 0
		errs     []error
		produced = make(chan struct{})
		progress = time.Now()
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	wg.Add(1)
	go func() { // producer: 300 batches of 10
		defer wg.Done()
		defer close(produced)
		conn := pgtest.Conn(t, e.dsn)
		for i := 0; i < total; i += 10 {
			batch := make([]string, 10)
			for j := range batch {
				batch[j] = fmt.Sprintf("e%d", i+j)
			}
			if _, err := conn.Exec(ctx, `SELECT pgque.send_batch('q', $1::text[])`, batch); err != nil {
				fail(fmt.Errorf("send_batch: %w", err))
				return
			}
		}
	}()
	wg.Add(1)
	go func() { // ticker
		defer wg.Done()
		conn := pgtest.Conn(t, e.dsn)
		for ctx.Err() == nil {
			if _, err := conn.Exec(ctx, `SELECT pgque.force_next_tick('q'); SELECT pgque.ticker('q')`); err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("ticker: %w", err))
				return
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	done := make(chan struct{})
	var doneOnce sync.Once
	for w := 0; w < 2; w++ {
		w := w
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := pgtest.Conn(t, e.dsn)
			rnd := rand.New(rand.NewSource(int64(w)))
			for ctx.Err() == nil {
				select {
				case <-done:
					return
				default:
				}
				ms, err := tryReceive(ctx, conn, "q", "c", 1+rnd.Intn(40))
				if isBusy(err) {
					mu.Lock()
					refused++
					mu.Unlock()
					time.Sleep(time.Duration(rnd.Intn(2000)) * time.Microsecond)
					continue
				}
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("worker %d receive: %w", w, err))
					}
					return
				}
				if len(ms) == 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				mu.Lock()
				for _, m := range ms {
					got[m.Payload]++
				}
				n := len(got)
				progress = time.Now()
				mu.Unlock()
				var ok int64
				if err := conn.QueryRow(ctx, `SELECT pgque.ack($1)`, ms[0].Batch).Scan(&ok); err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("worker %d ack(%d): %w", w, ms[0].Batch, err))
					}
					return
				}
				if ok != 1 {
					mu.Lock()
					badAcks++
					mu.Unlock()
				}
				if n >= total {
					doneOnce.Do(func() { close(done) })
				}
			}
		}()
	}
	// Until everything arrived, or (when something is lost) 3 s without a
	// delivery once the producer is done.
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			break wait
		case <-time.After(100 * time.Millisecond):
		}
		select {
		case <-produced:
			mu.Lock()
			idle := time.Since(progress)
			mu.Unlock()
			if idle > 3*time.Second {
				break wait
			}
		default:
		}
	}
	cancel()
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	lost, dups := 0, 0
	for i := 0; i < total; i++ {
		switch n := got[fmt.Sprintf("e%d", i)]; {
		case n == 0:
			lost++
		case n > 1:
			dups += n - 1
		}
	}
	if lost != 0 || dups != 0 || len(got) != total || badAcks != 0 {
		t.Fatalf("%d sent, %d distinct delivered: lost = %d, duplicates = %d, acks of a delivery returning 0 = %d (want 0, 0, 0)", total, len(got), lost, dups, badAcks)
	}
	t.Logf("%d events, 2 workers, %d receives refused while the other worker's delivery was open", total, refused)
}

// TestBatchSecondReaderRepeatableRead: a second reader in REPEATABLE READ
// whose snapshot predates the first reader's delivery cannot get the same
// events: it fails (40001 or 55P03) and the events are delivered once.
func TestBatchSecondReaderRepeatableRead(t *testing.T) {
	e := setup(t)
	want := e.tickedBatch(10)
	w2 := pgtest.Conn(t, e.dsn)
	tx, err := w2.BeginTx(ctxT(t), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	var one int
	if err := tx.QueryRow(ctxT(t), `SELECT 1`).Scan(&one); err != nil {
		t.Fatal(err)
	}
	a := e.receive("q", "c", 100)
	if len(a) != 10 {
		t.Fatalf("first reader got %d events", len(a))
	}
	rows, err := tx.Query(ctxT(t), `SELECT payload FROM pgque.receive('q', 'c', 100)`)
	if err == nil {
		var got []string
		got, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil {
			t.Fatalf("the REPEATABLE READ second reader got %v", got)
		}
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || (pe.Code != "40001" && pe.Code != "55P03") {
		t.Fatalf("second reader: %v, want 40001 or 55P03", err)
	}
	_ = tx.Rollback(ctxT(t))
	if n := e.int64(`SELECT pgque.ack($1)`, a[0].Batch); n != 1 {
		t.Fatalf("ack = %d", n)
	}
	e.tick("q")
	if more := e.receive("q", "c", 100); len(more) != 0 {
		t.Fatalf("after the ack: %d more", len(more))
	}
	exactlyOnce(t, msgPayloads(a), want)
}
