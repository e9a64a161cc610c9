package sql_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// runLoop runs one CALL pgque.ticker_loop() on its own connection, sized to
// end at the next second boundary, and returns a channel closed when it ends.
func runLoop(t *testing.T, e *engine) <-chan error {
	t.Helper()
	e.exec(`SELECT pgque.set_setting('ticker_slot_seconds', '1')`)
	e.exec(`SELECT pgque.set_setting('ticker_overrun_ms', '0')`)
	loop := pgtest.Conn(t, e.dsn)
	done := make(chan error, 1)
	go func() {
		_, err := loop.Exec(context.Background(), `CALL pgque.ticker_loop()`)
		done <- err
	}()
	return done
}

// loopFor calls ticker_loop repeatedly for about d.
func loopFor(t *testing.T, e *engine, d time.Duration) {
	t.Helper()
	for until := time.Now().Add(d); time.Now().Before(until); {
		if err := <-runLoop(t, e); err != nil {
			t.Fatalf("ticker_loop: %v", err)
		}
	}
}

func TestTickerLoopCommitsEachRound(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	// One run that lasts until the test ends it (an hour-long slot, away
	// from the hour's end), so a slow machine cannot make the run end
	// before the test observed it: no wall-clock race.
	e.exec(`SELECT pgque.set_setting('ticker_slot_seconds', '3600')`)
	e.exec(`SELECT pgque.set_setting('ticker_overrun_ms', '0')`)
	if until := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); until < time.Minute {
		time.Sleep(until + time.Second)
	}
	loop := pgtest.Conn(t, e.dsn)
	loopPID := loop.PgConn().PID()
	done := make(chan error, 1)
	go func() {
		_, err := loop.Exec(context.Background(), `CALL pgque.ticker_loop()`)
		done <- err
	}()
	var got []string
	seenWhileRunning := false
	for i := 0; i < 20; i++ {
		e.exec(`SELECT pgque.send('q', $1::text)`, fmt.Sprint(i))
		time.Sleep(25 * time.Millisecond)
		ms := e.receive("q", "c", 100)
		if len(ms) > 0 {
			select {
			case err := <-done:
				t.Fatalf("ticker_loop ended before its slot did: %v", err)
			default:
				seenWhileRunning = true
			}
			for _, m := range ms {
				got = append(got, m.Payload)
			}
			e.exec(`SELECT pgque.ack($1)`, ms[0].Batch)
		}
	}
	// End the run: a cancel between rounds loses nothing committed.
	e.exec(`SELECT pg_cancel_backend($1)`, int64(loopPID))
	if err := <-done; err != nil {
		if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != pgerrcode.QueryCanceled {
			t.Fatalf("ticker_loop: %v", err)
		}
	}
	if !seenWhileRunning {
		t.Fatal("no tick became visible to another session while ticker_loop ran: it does not commit per round")
	}
	// Every tick was its own transaction.
	if n := e.int64(`SELECT count(*) - count(DISTINCT xmin::text) FROM pgque.tick WHERE tick_queue = 1`); n != 0 {
		t.Fatalf("%d ticks shared a transaction with another tick", n)
	}
	e.exec(`SELECT pgque.force_next_tick('q')`)
	e.exec(`SELECT pgque.ticker()`)
	got = append(got, e.drain("q", "c", 100)...)
	var want []string
	for i := 0; i < 20; i++ {
		want = append(want, fmt.Sprint(i))
	}
	exactlyOnce(t, got, want)
}

func TestTickerPerQueuePeriodsAndIdleQueues(t *testing.T) {
	e := setup(t)
	for _, q := range []string{"fast", "slow", "idle", "groups"} {
		e.exec(`SELECT pgque.create_queue($1)`, q)
	}
	// The periods apply to queues a classic consumer reads; "groups" has
	// none (consumer groups need no ticks): it ticks by the classic
	// thresholds (ticker_max_lag 3 s; ticker_max_count out of reach).
	for _, q := range []string{"fast", "slow", "idle"} {
		e.exec(`SELECT pgque.subscribe($1, 'c')`, q)
	}
	e.exec(`SELECT pgque.set_queue_config('groups', 'ticker_max_count', '100000')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.exec(`SELECT pgque.set_queue_config('slow', 'tick_period_ms', '250')`)
	e.exec(`SELECT pgque.ticker()`) // the post-creation tick of every queue
	base := map[string]int64{}
	for _, q := range []string{"fast", "slow", "idle", "groups"} {
		base[q] = e.int64(`SELECT count(*) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = $1`, q)
	}

	ctx, cancel := context.WithCancel(ctxT(t))
	producer := pgtest.Conn(t, e.dsn)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_, _ = producer.Exec(ctx, `SELECT pgque.send('fast', 'x'::text), pgque.send('slow', 'x'::text), pgque.send('groups', 'x'::text)`)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	count := func(q string) int64 {
		return e.int64(`SELECT count(*) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = $1`, q) - base[q]
	}
	// Run the loop until the fast queue has had enough rounds to tell the
	// periods apart (1.5 s on a quiet machine; a loaded CI machine may need
	// longer: its rounds can take tens of milliseconds), at most 30 s.
	began := time.Now()
	for deadline := time.Now().Add(30 * time.Second); ; {
		loopFor(t, e, 1500*time.Millisecond)
		if f, s := count("fast"), count("slow"); (f >= 10 && f > 2*s) || time.Now().After(deadline) {
			break
		}
	}
	cancel()
	wg.Wait()

	fast, slow, idle, groups := count("fast"), count("slow"), count("idle"), count("groups")
	if idle != 0 {
		t.Errorf("the idle queue got %d ticks", idle)
	}
	// At most one tick per ticker_max_lag (3 s) of the run.
	if most := 1 + int64(time.Since(began)/(3*time.Second)); groups > most {
		t.Errorf("the queue without a classic consumer got %d ticks in %s (fast: %d), want at most %d: ticked at the fast rate",
			groups, time.Since(began).Round(time.Millisecond), fast, most)
	}
	if slow < 1 || fast <= 2*slow {
		t.Errorf("ticks: fast (10 ms) %d, slow (250 ms) %d: periods not honoured", fast, slow)
	}
	// No two ticks of "slow" in the same 250 ms period slot.
	if n := e.int64(`
		SELECT count(*) - count(DISTINCT floor(extract(epoch FROM t.tick_time) * 1000 / 250))
		  FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue
		 WHERE q.queue_name = 'slow' AND t.tick_id > 2`); n != 0 {
		t.Errorf("%d ticks of the 250 ms queue came within one period", n)
	}
}

func TestLockedQueueDoesNotStopOthers(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('a')`)
	e.exec(`SELECT pgque.create_queue('b')`)
	// classic consumers: the 1 ms period applies (due_queues)
	e.exec(`SELECT pgque.subscribe('a', 'c'), pgque.subscribe('b', 'c')`)
	e.exec(`SELECT pgque.set_tick_period_ms(1)`)
	e.exec(`SELECT pgque.ticker()`)
	lastTick := func(q int) int64 { return e.int64(`SELECT max(tick_id) FROM pgque.tick WHERE tick_queue = $1`, q) }
	sendBoth := func() {
		e.exec(`SELECT pgque.send('a', 'x'::text), pgque.send('b', 'x'::text)`)
		time.Sleep(5 * time.Millisecond)
	}
	other := pgtest.Conn(t, e.dsn)

	// 1. Another session is changing queue a's configuration (holds its tick lock).
	sendBoth()
	tx, err := other.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t), `SELECT pgque.set_queue_config('a', 'ticker_max_count', '10')`); err != nil {
		t.Fatal(err)
	}
	a0, b0 := lastTick(1), lastTick(2)
	if n := e.int64(`SELECT pgque.ticker()`); n != 1 || lastTick(2) == b0 || lastTick(1) != a0 {
		t.Fatalf("with a's tick lock held, ticker() ticked %d queues (a %d->%d, b %d->%d), want only b", n, a0, lastTick(1), b0, lastTick(2))
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if n := e.int64(`SELECT pgque.ticker()`); n < 1 || lastTick(1) == a0 {
		t.Fatalf("after the lock was released ticker() ticked %d queues, want a among them", n)
	}

	// 2. Queue a's event sequence is locked exclusively (an ALTER in progress):
	// the set-based check cannot read it, b must still tick.
	sendBoth()
	tx, err = other.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t), `ALTER SEQUENCE pgque.event_1_id_seq CACHE 1`); err != nil {
		t.Fatal(err)
	}
	b0 = lastTick(2)
	if n := e.int64(`SELECT pgque.ticker()`); n != 1 || lastTick(2) == b0 {
		t.Fatalf("with a's sequence locked, ticker() ticked %d queues, want b only", n)
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestMetadataRotationLosesNoCursor(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	consumers := []string{"c1", "c2", "c3"}
	for _, c := range consumers {
		e.exec(`SELECT pgque.subscribe('q', $1)`, c)
	}
	e.exec(`SELECT pgque.set_tick_period_ms(1)`)
	e.exec(`SELECT pgque.set_setting('meta_rotation_period_ms', '100')`)
	e.exec(`SELECT pgque.set_setting('meta_rotation_max_pages', '1')`)
	// Enough acks to fill and rotate subscription children: receive writes
	// no row (only ack does), so 600 events gave as few as 2 rotation actions.
	const n = 1200
	genBefore := e.int64(`SELECT coalesce(pg_sequence_last_value('pgque.subscription_gen_seq'), 0)`)

	// Someone holds the xmin horizon: no pruning, the tables must rotate.
	holder := pgtest.Conn(t, e.dsn)
	held, err := holder.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Rollback(context.Background()) }()
	if _, err := held.Exec(ctxT(t), `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec(ctxT(t), `SELECT count(*) FROM pgque.queue`); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(ctxT(t), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	bg := func(f func(conn *pgx.Conn) error) {
		conn := pgtest.Conn(t, e.dsn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(conn); err != nil && ctx.Err() == nil {
				errs <- err
				cancel()
			}
		}()
	}
	producing := make(chan struct{})
	bg(func(conn *pgx.Conn) error { // producer
		defer close(producing)
		for i := 0; i < n; i++ {
			if _, err := conn.Exec(ctx, `SELECT pgque.send('q', $1::text)`, fmt.Sprint(i)); err != nil {
				return fmt.Errorf("send: %w", err)
			}
		}
		return nil
	})
	rotations := make(chan int64, 1)
	bg(func(conn *pgx.Conn) error { // ticker + rotation, each call its own transaction
		var total int64
		defer func() { rotations <- total }()
		for ctx.Err() == nil {
			if _, err := conn.Exec(ctx, `SELECT pgque.ticker()`); err != nil {
				return fmt.Errorf("ticker: %w", err)
			}
			var r int64
			if err := conn.QueryRow(ctx, `SELECT pgque.rotate_metadata()`).Scan(&r); err != nil {
				return fmt.Errorf("rotate_metadata: %w", err)
			}
			total += r
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	})
	results := make([][]string, len(consumers))
	for i, c := range consumers {
		i, c := i, c
		bg(func(conn *pgx.Conn) error {
			idle := 0
			for ctx.Err() == nil {
				rows, err := conn.Query(ctx, `SELECT msg_id, batch_id, payload FROM pgque.receive('q', $1, 7)`, c)
				if err != nil {
					return fmt.Errorf("receive %s: %w", c, err)
				}
				var batch int64
				got := 0
				for rows.Next() {
					var id int64
					var p string
					if err := rows.Scan(&id, &batch, &p); err != nil {
						return err
					}
					results[i] = append(results[i], p)
					got++
				}
				if err := rows.Err(); err != nil {
					return fmt.Errorf("receive %s: %w", c, err)
				}
				if got == 0 {
					select {
					case <-producing:
						idle++
						if idle > 200 {
							return nil
						}
					default:
					}
					time.Sleep(2 * time.Millisecond)
					continue
				}
				idle = 0
				var ok int
				if err := conn.QueryRow(ctx, `SELECT pgque.ack($1)`, batch).Scan(&ok); err != nil || ok != 1 {
					return fmt.Errorf("ack %s batch %d = %d: %v", c, batch, ok, err)
				}
			}
			return nil
		})
	}
	// Wait for the consumers, then stop the ticker.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			done := true
			for i := range consumers {
				if len(results[i]) < n {
					done = false
				}
			}
			if done {
				cancel()
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprint(i))
	}
	for i, c := range consumers {
		t.Run(c, func(t *testing.T) { exactlyOnce(t, results[i], want) })
	}
	if r := <-rotations; r < 3 {
		t.Errorf("only %d rotation actions happened: the test did not exercise rotation", r)
	}
	if g := e.int64(`SELECT coalesce(pg_sequence_last_value('pgque.subscription_gen_seq'), 0)`); g-genBefore < 2 {
		t.Errorf("the subscription table rotated %d times, want >= 2", g-genBefore)
	}
}
