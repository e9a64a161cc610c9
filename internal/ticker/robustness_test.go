package ticker_test

// The pg_cron ticker must survive what happens around it: an error inside
// CALL pgque.ticker_loop() ends the run, and pg_cron 1.4 starts the next one
// only at the next minute boundary — up to a minute without ticks.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

const (
	qDropQueue = `SELECT pgque.drop_queue($1, true)`
	qLockTick  = `LOCK TABLE pgque.tick_0, pgque.tick_1, pgque.tick_2 IN ACCESS EXCLUSIVE MODE`
)

// A queue dropped while the loop runs must not end the loop.
func TestTickerLoopSurvivesDropQueue(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	s.exec(t, qShortSlot)
	ctx, stop := context.WithCancel(s.ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // create, fill and drop queues while the loop ticks
		defer wg.Done()
		c := pgtest.Conn(t, s.dsn)
		for i := 0; ctx.Err() == nil; i++ {
			q := fmt.Sprintf("churn_%d", i)
			for _, st := range []string{qCreateQueue, qSend, qSend} {
				if _, err := c.Exec(ctx, st, q); err != nil && ctx.Err() == nil {
					t.Errorf("%s %s: %v", st, q, err)
					return
				}
			}
			time.Sleep(15 * time.Millisecond)
			if _, err := c.Exec(ctx, qDropQueue, q); err != nil && ctx.Err() == nil {
				t.Errorf("drop %s: %v", q, err)
				return
			}
		}
	}()
	sendWG := s.sendEvery(t, ctx, 5*time.Millisecond, "q")
	err := <-loopRun(t, s)
	stop()
	wg.Wait()
	sendWG.Wait()
	if err != nil {
		t.Fatalf("ticker_loop ended with an error while queues were dropped (pg_cron would not tick until its next slot): %v", err)
	}
}

// Concurrent metadata rotations (the loop's own every 200 ms, the
// pgque_rotate_meta and pgque_maint cron jobs at each minute) must skip each
// other, not deadlock or time out.
func TestConcurrentRotateMetadataRaisesNothing(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	s.exec(t, qFastRotation)
	s.exec(t, qSubscribe, "q", "c")
	ctx, cancel := context.WithTimeout(s.ctx, 3*time.Second)
	defer cancel()
	sendWG := s.sendEvery(t, ctx, 2*time.Millisecond, "q")
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a consumer that keeps up, so old tick children become truncatable
		defer wg.Done()
		c := pgtest.Conn(t, s.dsn)
		for ctx.Err() == nil {
			var batch *int64
			if err := c.QueryRow(ctx, `SELECT max(batch_id) FROM pgque.receive('q', 'c', 1000)`).Scan(&batch); err != nil {
				continue
			}
			if batch != nil {
				_, _ = c.Exec(ctx, qAck, *batch)
			}
		}
	}()
	for i, q := range []string{qTicker, qRotateMeta, qRotateMeta, qRotateMeta, `SELECT pgque.maint()`, `SELECT pgque.maint()`} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := pgtest.Conn(t, s.dsn)
			for ctx.Err() == nil {
				_, err := c.Exec(ctx, q)
				var pe *pgconn.PgError
				if errors.As(err, &pe) {
					mu.Lock()
					if len(errs) < 10 {
						errs = append(errs, fmt.Sprintf("session %d %s: %s (SQLSTATE %s) %s", i, q, pe.Message, pe.Code, pe.Where))
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	sendWG.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent rotate_metadata()/maint() raised errors (each one ends a ticker_loop run):\n%v", errs)
	}
}

// A tick table locked by someone else for a moment (rotate_metadata's
// TRUNCATE in another session) must cost a skipped round, not the loop.
func TestTickerLoopSurvivesALockedTickTable(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	s.exec(t, qShortSlot)
	ctx, stop := context.WithCancel(s.ctx)
	defer stop()
	sendWG := s.sendEvery(t, ctx, 5*time.Millisecond, "q")
	done := loopRun(t, s)
	time.Sleep(300 * time.Millisecond)
	locker := pgtest.Conn(t, s.dsn)
	tx, err := locker.Begin(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(s.ctx, qLockTick); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	_ = tx.Rollback(s.ctx)
	err = <-done
	stop()
	sendWG.Wait()
	if err != nil {
		t.Fatalf("ticker_loop ended with an error after the tick table was locked for 200 ms: %v", err)
	}
}

// An event whose transaction took its event id before a tick but committed
// after it must still be delivered within a few tick periods: the tick
// counted its id (the event sequence moved) but its snapshot did not see
// the transaction, so "new events since the last tick" must not be judged
// by the sequence alone.
func TestEventCommittedAcrossATickIsDelivered(t *testing.T) {
	t.Parallel()
	s := newSetup(t) // queue q, 10 ms period
	s.exec(t, qSubscribe, "q", "c")
	s.exec(t, qSend, "q") // the first event after creation
	if _, err := s.conn.Exec(s.ctx, qTicker); err != nil {
		t.Fatal(err)
	}
	cons := pgtest.Conn(t, s.dsn)
	drain := func() int {
		rows, err := cons.Query(s.ctx, qReceive, "q", "c")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		batches := map[int64]bool{}
		var id, b int64
		if _, err := pgxForEach(rows, &id, &b, func() { n++; batches[b] = true }); err != nil {
			t.Fatal(err)
		}
		for b := range batches {
			if _, err := cons.Exec(s.ctx, qAck, b); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	for range 5 { // settle: everything so far delivered
		time.Sleep(15 * time.Millisecond)
		_, _ = s.conn.Exec(s.ctx, qTicker)
		drain()
	}

	producer := pgtest.Conn(t, s.dsn)
	tx, err := producer.Begin(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(s.ctx, qSend, "q"); err != nil { // takes its ev_id now
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := s.conn.Exec(s.ctx, qTicker); err != nil { // ticks: the sequence moved
		t.Fatal(err)
	}
	if err := tx.Commit(s.ctx); err != nil { // visible only after that tick
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second) // 200 tick periods
	for time.Now().Before(deadline) {
		time.Sleep(15 * time.Millisecond)
		if _, err := s.conn.Exec(s.ctx, qTicker); err != nil {
			t.Fatal(err)
		}
		if drain() > 0 {
			return
		}
	}
	t.Fatal("an event committed just after a tick was not delivered within 2 s of ticking every 15 ms: " +
		"due_queues() sees no new events (the sequence did not move since that tick), so the queue waits for its idle period (1 min) or the next event")
}

func pgxForEach(rows pgx.Rows, id, b *int64, fn func()) (int, error) {
	n := 0
	_, err := pgx.ForEachRow(rows, []any{id, b}, func() error { n++; fn(); return nil })
	return n, err
}
