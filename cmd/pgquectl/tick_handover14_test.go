package main

import (
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/locks"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// qLoopHolderSince: the backend holding the loop lock in this database, its
// start, and the minute boundary now is in (server clock for both).
const qLoopHolderSince = `SELECT a.pid, a.backend_start, date_trunc('minute', now())
  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1::oid AND l.objid = $2::oid AND l.objsubid = 2
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// TestTickPgCron14HandoverIsWarm: on pg_cron 1.4 the run that takes over
// at a minute's slot end (1.5 s past the minute) is one pg_cron started at
// the minute, which stood by on the loop lock (and warmed up), not a cold
// backend started when the previous run returned. Before, one job held
// every slot and its queued run started only once the previous returned:
// the new holder's backend started at or after the slot end.
func TestTickPgCron14HandoverIsWarm(t *testing.T) {
	t.Parallel()
	pgtest.RequireCron(t)
	ctx := tickCtx(t, 4*time.Minute)
	dsn := pgtest.NewDB(t)
	engine := pgtest.Conn(t, dsn)
	pgtest.Exec(t, dsn, `SELECT pgque.create_queue('q')`)
	t.Cleanup(func() { runMain(t, "tick", "--dsn", dsn, "--off") })
	if _, stderr, code := runMain(t, "tick", "--dsn", dsn, "--hz", "50"); code != 0 {
		t.Fatalf("tick --hz 50: exit %d: %s", code, stderr)
	}
	holder := func() (pid int32, started, minute time.Time, ok bool) {
		t.Helper()
		err := engine.QueryRow(ctx, qLoopHolderSince, locks.ClassID, locks.TickerLoop).Scan(&pid, &started, &minute)
		return pid, started, minute, err == nil
	}
	// pg_cron starts the first run at the next minute boundary.
	var first int32
	var minute time.Time
	for deadline := time.Now().Add(80 * time.Second); first == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no ticker_loop run holds the loop lock 80 s after tick --hz 50")
		}
		time.Sleep(250 * time.Millisecond)
		if pid, _, m, ok := holder(); ok {
			first, minute = pid, m
		}
	}
	// The first handover: 1.5 s past the next minute. Look 5 s past it.
	handover := minute.Add(time.Minute + 1500*time.Millisecond)
	time.Sleep(time.Until(handover.Add(5 * time.Second)))
	pid, started, _, ok := holder()
	if !ok {
		t.Fatal("nobody holds the loop lock 5 s after the handover")
	}
	if pid == first {
		t.Fatalf("backend %d still holds the loop lock after its slot end %s", pid, handover.Format(time.StampMilli))
	}
	if !started.Before(handover) {
		t.Fatalf("the new holder's backend started at %s, not before the handover at %s: a cold start, no standby",
			started.Format(time.StampMilli), handover.Format(time.StampMilli))
	}
	if n := ticks(t, ctx, engine, "q"); n < 1 {
		t.Fatal("no tick")
	}
}
