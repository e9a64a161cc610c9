package sql_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// TestTickerLoopRunsMaintenance: with ticker_maint_ms set (pg_cron 1.4,
// where no maintenance job is registered) a ticker_loop() run does what
// the per-minute pgque_maint job did: here, maint()'s event-table switch
// (step 1) of a queue whose rotation period is 0. With ticker_maint_ms = 0
// (the default; pg_cron >= 1.5 runs maint() as a job) the loop does not.
func TestTickerLoopRunsMaintenance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maintMS string
		switch_ bool
	}{{"1000", true}, {"0", false}} {
		t.Run("ticker_maint_ms="+tc.maintMS, func(t *testing.T) {
			e := setup(t)
			e.exec(`SELECT pgque.create_queue('q')`)
			e.exec(`SELECT pgque.set_queue_config('q', 'rotation_period', '0')`)
			e.exec(`SELECT pgque.set_tick_period_ms(10)`)
			e.exec(`SELECT pgque.set_setting('ticker_maint_ms', $1)`, tc.maintMS)
			// One run that lasts until the test ends it (an hour-long slot,
			// away from the hour's end).
			e.exec(`SELECT pgque.set_setting('ticker_slot_seconds', '3600'), pgque.set_setting('ticker_overrun_ms', '0')`)
			if until := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); until < time.Minute {
				time.Sleep(until + time.Second)
			}
			table0 := e.int64(`SELECT queue_cur_table FROM pgque.queue WHERE queue_name = 'q'`)
			loop := pgtest.Conn(t, e.dsn)
			done := make(chan error, 1)
			go func() {
				_, err := loop.Exec(context.Background(), `CALL pgque.ticker_loop()`)
				done <- err
			}()
			// The first maint() is due 5 s into the run, then every
			// ticker_maint_ms; the switch needs a step 2 first (every 1 s).
			switched := false
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !switched; {
				time.Sleep(200 * time.Millisecond)
				switched = e.int64(`SELECT queue_cur_table FROM pgque.queue WHERE queue_name = 'q'`) != table0
				if !tc.switch_ && time.Now().After(deadline.Add(-18*time.Second)) {
					break // 12 s: two and a half maint periods, none ran
				}
			}
			e.exec(`SELECT pgque.set_setting('ticker_loop_enabled', 'false')`)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("ticker_loop: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("ticker_loop did not end after ticker_loop_enabled = false")
			}
			if switched != tc.switch_ {
				t.Fatalf("ticker_maint_ms=%s: event table switched = %v, want %v", tc.maintMS, switched, tc.switch_)
			}
			if ticks := e.int64(`SELECT count(*) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = 'q'`); ticks < 1 {
				t.Fatal("the loop made no tick")
			}
		})
	}
}

// TestCronJobsOnPgCron14DoNotStartTogether: on pg_cron 1.4 (minute
// schedules) at most one of the engine's jobs starts at any minute
// boundary - the ticker run that takes over 1.5 s later - instead of the
// ticker plus four maintenance jobs, each a new backend at the same
// instant (the stalls measured at :00). The two ticker jobs alternate
// minutes, so a standby run starts every minute; the purge runs in the
// cron database once an hour. On pg_cron >= 1.5 the loop maintains too.
func TestCronJobsOnPgCron14DoNotStartTogether(t *testing.T) {
	e := setup(t)
	rows, err := e.conn.Query(ctxT(t), `SELECT jobname, schedule, command, run_in_cron_db FROM pgque.cron_jobs('1.4.2')`)
	if err != nil {
		t.Fatal(err)
	}
	perMinute := make([][]string, 60)
	tickers := 0
	for rows.Next() {
		var name, sched, cmd string
		var inCron bool
		if err := rows.Scan(&name, &sched, &cmd, &inCron); err != nil {
			t.Fatal(err)
		}
		if cmd == "CALL pgque.ticker_loop()" {
			tickers++
		}
		if inCron {
			continue // the hourly purge of cron.job_run_details
		}
		for m := range 60 {
			if cronMinuteFires(t, sched, m) {
				perMinute[m] = append(perMinute[m], name)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if tickers != 2 {
		t.Fatalf("pg_cron 1.4: %d ticker jobs, want 2 (one stands by for the other)", tickers)
	}
	for m, jobs := range perMinute {
		if len(jobs) != 1 {
			t.Errorf("pg_cron 1.4: minute %d starts %d jobs of the engine database (%s), want exactly 1", m, len(jobs), strings.Join(jobs, ", "))
		}
	}
	if v := e.int64(`SELECT pgque.set_cron_version('1.4.2')`); v != 60 {
		t.Fatalf("set_cron_version('1.4.2') = %d, want 60", v)
	}
	if v := e.int64(`SELECT pgque.get_setting('ticker_maint_ms')::int`); v != 10000 {
		t.Fatalf("pg_cron 1.4: ticker_maint_ms = %d, want 10000 (the loop maintains)", v)
	}
	// pg_cron >= 1.5: no maintenance jobs either. On second schedules they
	// started a backend every ~1.6 s whose start-up, and whose own
	// rotate_metadata(), competed with the loop (the pg_cron 1.6 headline
	// bench's tick gaps over 50 ms sat on them).
	if n := e.int64(`SELECT pgque.set_cron_version('1.6.7')`); n != 60 {
		t.Fatalf("set_cron_version('1.6.7') = %d, want 60", n)
	}
	if v := e.int64(`SELECT pgque.get_setting('ticker_maint_ms')::int`); v != 10000 {
		t.Fatalf("pg_cron 1.6: ticker_maint_ms = %d, want 10000 (the loop maintains)", v)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.cron_jobs('1.6.7')`); n != 3 {
		t.Fatalf("pg_cron 1.6: %d jobs, want 3 (two ticker jobs, the purge)", n)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.cron_jobs('1.6.7') WHERE NOT run_in_cron_db AND command <> 'CALL pgque.ticker_loop()'`); n != 0 {
		t.Fatalf("pg_cron 1.6: %d jobs besides the ticker loop start a backend in the engine database, want 0", n)
	}
}

// cronMinuteFires says whether a 5-field cron schedule of the forms the
// engine uses ('*', 'M', '*/N', 'A-B/N' in the minute field, '*' in the
// others) fires at minute m of an hour.
func cronMinuteFires(t *testing.T, sched string, m int) bool {
	t.Helper()
	f := strings.Fields(sched)
	if len(f) != 5 || f[1] != "*" || f[2] != "*" || f[3] != "*" || f[4] != "*" {
		t.Fatalf("schedule %q is not a per-hour minute schedule", sched)
	}
	rng, step := f[0], 1
	if r, s, ok := strings.Cut(f[0], "/"); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("schedule %q: bad step", sched)
		}
		rng, step = r, n
	}
	lo, hi := 0, 59
	switch {
	case rng == "*":
	case strings.Contains(rng, "-"):
		a, b, _ := strings.Cut(rng, "-")
		var err1, err2 error
		lo, err1 = strconv.Atoi(a)
		hi, err2 = strconv.Atoi(b)
		if err1 != nil || err2 != nil {
			t.Fatalf("schedule %q: bad range", sched)
		}
	default:
		n, err := strconv.Atoi(rng)
		if err != nil {
			t.Fatalf("schedule %q: bad minute", sched)
		}
		lo, hi = n, n
	}
	return m >= lo && m <= hi && (m-lo)%step == 0
}

// TestTickerLoopLogsARoundSummary: with ticker_debug_round_ms set, the loop
// LOGs every 10 s how many rounds it ran and where an ordinary round's time
// went (mean sleep overshoot, ticker(), COMMIT) - the evidence for its
// share of the delivery latency, which the slow-round log alone (rounds
// over the threshold) does not give.
func TestTickerLoopLogsARoundSummary(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.exec(`SELECT pgque.set_setting('ticker_debug_round_ms', '5000')`)
	e.exec(`SELECT pgque.set_setting('ticker_slot_seconds', '3600'), pgque.set_setting('ticker_overrun_ms', '0')`)
	if until := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); until < time.Minute {
		time.Sleep(until + time.Second)
	}
	loop := newLogConn(t, e.dsn)
	done := make(chan error, 1)
	go func() {
		_, err := loop.Exec(context.Background(), `CALL pgque.ticker_loop()`)
		done <- err
	}()
	re := regexp.MustCompile(`^pgque: ticker_loop rounds: (\d+) in the last 10 s \(period 10 ms\): mean sleep overshoot [0-9.]+ ms, ticker\(\) [0-9.]+ ms, commit [0-9.]+ ms$`)
	var summary string
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline) && summary == ""; {
		time.Sleep(250 * time.Millisecond)
		for _, m := range loop.take("ticker_loop rounds:") {
			summary = strings.TrimPrefix(m, "LOG: ")
		}
	}
	e.exec(`SELECT pgque.set_setting('ticker_loop_enabled', 'false')`)
	if err := <-done; err != nil {
		t.Fatalf("ticker_loop: %v", err)
	}
	if summary == "" {
		t.Fatal("no round summary LOGged within 40 s of ticker_debug_round_ms > 0")
	}
	m := re.FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("summary %q does not have the documented form", summary)
	}
	t.Logf("%s", summary)
	if n, _ := strconv.Atoi(m[1]); n < 1 {
		t.Fatalf("summary %q counts no round", summary)
	}
}
