package sql_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// qHoldsLoopLock: whether backend $1 holds the loop lock (1885827445, 5).
const qHoldsLoopLock = `SELECT count(*) FROM pg_locks l
 WHERE l.locktype = 'advisory' AND l.granted AND l.pid = $1
   AND l.classid = 1885827445 AND l.objid = 5 AND l.objsubid = 2
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// TestTickerLoopTakeoverRacingItsLockTimeout: a standby waits for the loop
// lock in 100 ms lock_timeout steps. When the holder lets go just as a
// step's timeout fires (a loaded machine: the waiter is granted the lock
// but is not scheduled before its timer goes off), PostgreSQL grants the
// session-level lock and still raises "canceling statement due to lock
// timeout". Before, the standby took that for "not yet", waited again,
// was granted the lock a second time at once, and on its way out released
// it only once: its session kept the lock until the backend exited - with
// pg_cron 1.4 after the 2 s linger, so the next standby could not tick
// for 2 s (the 2,036 ms gap of the 10 Hz cell in the full profile).
// Reproduced exactly: the standby's backend is stopped (SIGSTOP) while it
// waits, the holder unlocks, the 100 ms timer fires while it is stopped,
// then it runs on. Its run must tick and, once it returns, hold nothing.
func TestTickerLoopTakeoverRacingItsLockTimeout(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	// 2 s slots: the standby gives up after 4 s; once it holds the lock
	// it ticks to the next 2 s boundary.
	e.exec(`SELECT pgque.set_setting('ticker_slot_seconds', '2'), pgque.set_setting('ticker_overrun_ms', '0')`)

	holder := pgtest.Conn(t, e.dsn)
	if _, err := holder.Exec(ctxT(t), `SELECT pg_advisory_lock(1885827445, 5)`); err != nil {
		t.Fatal(err)
	}
	standby := pgtest.Conn(t, e.dsn)
	var pid int
	if err := standby.QueryRow(ctxT(t), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := standby.Exec(ctx, `CALL pgque.ticker_loop()`)
		done <- err
	}()
	// Wait until the standby waits on the lock.
	deadline := time.Now().Add(3 * time.Second)
	for {
		var waiting int64
		if err := holder.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity
		   WHERE pid = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby never waited on the loop lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ticks := e.int64(`SELECT count(*) FROM pgque.tick`)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping the standby's backend %d: %v", pid, err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	var unlocked bool
	if err := holder.QueryRow(ctxT(t), `SELECT pg_advisory_unlock(1885827445, 5)`).Scan(&unlocked); err != nil || !unlocked {
		t.Fatalf("unlocking: %v %v", unlocked, err)
	}
	time.Sleep(300 * time.Millisecond) // past the 100 ms lock_timeout
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("standby ticker_loop: %v", err)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the standby's ticker_loop did not return")
	}
	if n := e.int64(`SELECT count(*) FROM pgque.tick`); n <= ticks {
		t.Errorf("the standby made no tick after the takeover (%d ticks before, %d after)", ticks, n)
	}
	var held int64
	if err := holder.QueryRow(ctxT(t), qHoldsLoopLock, pid).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Fatalf("the standby's session still holds the loop lock after its ticker_loop returned: nobody else can tick until it disconnects")
	}
	// And anyone can take it now.
	var got bool
	if err := holder.QueryRow(ctxT(t), `SELECT pg_try_advisory_lock(1885827445, 5)`).Scan(&got); err != nil || !got {
		t.Fatalf("the loop lock cannot be taken after the run returned (%v)", err)
	}
}
