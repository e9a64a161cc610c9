package main

import (
	"context"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/locks"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// serve stands by for the pg_cron ticker loop: while the loop's lock is
// held it makes no tick; once the loop is gone it ticks events committed
// outside the broker (no pg_cron job, no daemon, no broker push) within
// about a second; with --standby-ticker=false nothing ticks them.
func TestServeStandbyTicker(t *testing.T) {
	t.Parallel()
	bin := buildPgquectl(t)
	for _, tc := range []struct {
		name  string
		args  []string
		ticks bool
	}{{"on", nil, true}, {"off", []string{"--standby-ticker=false"}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.NewDB(t)
			conn := pgtest.Conn(t, dsn)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			exec := func(sql string, args ...any) {
				t.Helper()
				if _, err := conn.Exec(ctx, sql, args...); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			exec(`SELECT pgque.create_queue('standby_q')`)
			exec(`SELECT pgque.set_queue_config('standby_q', 'tick_period_ms', '100')`)
			// The pg_cron loop is "alive": this session holds its lock.
			loop := pgtest.Conn(t, dsn)
			if _, err := loop.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, locks.ClassID, locks.TickerLoop); err != nil {
				t.Fatal(err)
			}
			ticks := func() int64 {
				var n int64
				if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue
				                               WHERE q.queue_name = 'standby_q'`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			b := newSoakBroker(t, "S", bin, dsn)
			b.args = append(tc.args, "--no-auto-tick")
			b.start()
			before := ticks()
			exec(`SELECT pgque.send('standby_q', 'outside the broker')`)
			time.Sleep(2 * time.Second)
			if got := ticks(); got != before {
				t.Fatalf("the broker ticked %d times while the pg_cron loop's lock was held; want 0 (it must stand by)", got-before)
			}
			// The loop dies.
			if _, err := loop.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, locks.ClassID, locks.TickerLoop); err != nil {
				t.Fatal(err)
			}
			gone := time.Now()
			deadline := gone.Add(10 * time.Second)
			for ticks() == before && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			took := time.Since(gone)
			switch {
			case tc.ticks && ticks() == before:
				t.Fatalf("no tick within 10 s after the loop was gone; broker log:\n%s", b.logTail())
			case tc.ticks:
				t.Logf("first tick %v after the loop was gone", took.Round(time.Millisecond))
			case !tc.ticks && ticks() != before:
				t.Fatalf("--standby-ticker=false ticked (%d ticks)", ticks()-before)
			}
		})
	}
}
