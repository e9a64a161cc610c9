package ticker_test

// The daemon next to the pg_cron loop (issue 8, fast takeover), its settings
// as a standby (issue 9, item 2) and its behaviour when the database is down
// at start, its application_name and stats line (issue 9, item 10).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/locks"
	"github.com/pgquectl/pgquectl/internal/pgtest"
	"github.com/pgquectl/pgquectl/internal/ticker"
)

const (
	qTakeLoopLock = `SELECT pg_advisory_lock($1::int4, $2::int4)`
	// pg_terminate_backend with a timeout returns once the backend is gone.
	qTerminateWait  = `SELECT pg_terminate_backend($1, 10000), clock_timestamp()`
	qFirstTickAfter = `SELECT min(t.tick_time) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue
	                     WHERE q.queue_name = $1 AND t.tick_time > $2`
	qSetting  = `SELECT pgque.get_setting('tick_period_ms')`
	qAppName  = `SELECT application_name FROM pg_stat_activity WHERE pid = $1`
	qLoopLock = `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid::int = $1 AND objid::int = $2 AND granted
	               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
)

// logBuf collects a logger's output for assertions.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
	t  *testing.T
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if testing.Verbose() {
		l.t.Log(strings.TrimSpace(string(p)))
	}
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) count(sub string) int { return strings.Count(l.String(), sub) }

func newLog(t *testing.T) (*logBuf, *slog.Logger) {
	b := &logBuf{t: t}
	return b, slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fakeLoop plays a pg_cron ticker_loop() run: it holds locks.TickerLoop on
// its own session and calls pgque.ticker() every 10 ms until its backend
// dies or the test ends. It returns the backend pid and a channel closed
// when it stopped ticking.
func (s setup) fakeLoop(t *testing.T) (int32, <-chan struct{}) {
	t.Helper()
	c := pgtest.Conn(t, s.dsn)
	if _, err := c.Exec(s.ctx, qTakeLoopLock, locks.ClassID, locks.TickerLoop); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if _, err := c.Exec(ctx, qTicker); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done }) // before the connection closes
	return int32(c.PgConn().PID()), done
}

// killAndExpectTakeover terminates the loop's backend with d standing by
// and asserts from the tick rows that ticks resume within 2 s.
func (s setup) killAndExpectTakeover(t *testing.T, d *ticker.Daemon, loopPID int32, loopDone <-chan struct{}) {
	t.Helper()
	ctx, stop := context.WithCancel(s.ctx)
	wg := s.sendEvery(t, ctx, 5*time.Millisecond, "q") // the queue is due every period
	defer wg.Wait()
	defer stop()
	time.Sleep(300 * time.Millisecond) // ticks flow through the loop
	if st := d.Stats(); st.Rounds != 0 || st.Role != ticker.RoleDeferring {
		t.Fatalf("while the loop holds its lock the daemon must defer and not tick: %+v", st)
	}
	var ok bool
	var killedAt time.Time
	if err := s.conn.QueryRow(s.ctx, qTerminateWait, loopPID).Scan(&ok, &killedAt); err != nil || !ok {
		t.Fatalf("terminating the loop's backend %d: %v %v", loopPID, ok, err)
	}
	if loopDone != nil {
		<-loopDone
	}
	var first *time.Time
	eventually(t, "a tick after the loop's backend was killed", func() bool {
		if err := s.conn.QueryRow(s.ctx, qFirstTickAfter, "q", killedAt).Scan(&first); err != nil {
			t.Fatal(err)
		}
		return first != nil
	})
	if gap := first.Sub(killedAt); gap > 2*time.Second {
		t.Fatalf("first tick %s after the loop's backend was killed: want within 2 s (the daemon stood by)", gap)
	}
	// The daemon publishes a round's stats after the round returns: the
	// tick can be visible a moment before.
	var st ticker.Stats
	eventually(t, "stats with the rounds that made the tick", func() bool {
		st = d.Stats()
		return st.Rounds > 0
	})
	if st.Takeovers != 1 || st.Role != ticker.RoleLeader {
		t.Fatalf("after the loop died: stats %+v, want one takeover and rounds as leader", st)
	}
}

// A daemon standing by for the pg_cron loop ticks within 2 s of the loop's
// backend being killed, and hands back as soon as a loop holds the lock
// again.
func TestDaemonTakesOverFromADeadLoopAndHandsBack(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	pid, loopDone := s.fakeLoop(t)
	d, _ := s.daemon(t, "standby")
	eventually(t, "the daemon leads and defers to the loop", func() bool {
		st := d.Stats()
		return st.Leader && st.Role == ticker.RoleDeferring
	})
	s.killAndExpectTakeover(t, d, pid, loopDone)

	// pg_cron starts the next run: the daemon stops ticking.
	s.fakeLoop(t)
	eventually(t, "the daemon hands back to the returned loop", func() bool { return d.Stats().Role == ticker.RoleDeferring })
	rounds := d.Stats().Rounds
	time.Sleep(500 * time.Millisecond)
	if st := d.Stats(); st.Rounds != rounds || st.Deferrals != 1 {
		t.Fatalf("the daemon kept ticking next to a live loop: rounds %d -> %d, stats %+v", rounds, st.Rounds, st)
	}
}

// A loop lock that is free only for a moment (pg_cron 1.4 hands over between
// runs in about 10 ms) must not make the daemon tick: it must be seen free
// throughout the confirmation window. The daemon checks every 20 ms here and
// wants 10 more free checks (200 ms), so it sees most of the free moments
// and would take over at once without the window.
func TestDaemonIgnoresABriefHandover(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	c := pgtest.Conn(t, s.dsn)
	if _, err := c.Exec(s.ctx, qTakeLoopLock, locks.ClassID, locks.TickerLoop); err != nil {
		t.Fatal(err)
	}
	d, _ := s.daemonWith(t, "standby", func(c *ticker.Config) { c.LoopPoll, c.LoopConfirm = 20*time.Millisecond, 10 })
	eventually(t, "the daemon defers to the loop", func() bool { return d.Stats().Role == ticker.RoleDeferring })
	for range 30 { // thirty handovers of about 10 ms
		time.Sleep(90 * time.Millisecond)
		if _, err := c.Exec(s.ctx, `SELECT pg_advisory_unlock($1::int4, $2::int4)`, locks.ClassID, locks.TickerLoop); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		if _, err := c.Exec(s.ctx, qTakeLoopLock, locks.ClassID, locks.TickerLoop); err != nil {
			t.Fatal(err)
		}
	}
	if st := d.Stats(); st.Rounds != 0 || st.Takeovers != 0 {
		t.Fatalf("the daemon took over during 10 ms handovers: %+v", st)
	}
}

// The same with the real procedure: CALL pgque.ticker_loop() holds
// locks.TickerLoop for its whole run. Skips where the loop does not take the
// lock yet.
func TestDaemonTakesOverFromAKilledTickerLoop(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	// One long slot: the run lasts until the test kills it.
	s.exec(t, `SELECT pgque.set_setting('ticker_slot_seconds', '3600'), pgque.set_setting('ticker_overrun_ms', '0')`)
	if until := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); until < 30*time.Second {
		time.Sleep(until + time.Second)
	}
	loop := pgtest.Conn(t, s.dsn)
	pid := int32(loop.PgConn().PID())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = loop.Exec(s.ctx, qTickerLoop, pgx.QueryExecModeSimpleProtocol)
	}()
	holds := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !holds; time.Sleep(50 * time.Millisecond) {
		var holder int32
		holds = s.conn.QueryRow(s.ctx, qLoopLock, locks.ClassID, locks.TickerLoop).Scan(&holder) == nil && holder == pid
	}
	if !holds {
		_, _ = s.conn.Exec(s.ctx, qTerminate, pid)
		<-done
		t.Skip("pgque.ticker_loop() does not hold locks.TickerLoop on this branch: the simulated loop covers the daemon's side")
	}
	d, _ := s.daemon(t, "standby")
	eventually(t, "the daemon defers to the loop", func() bool { return d.Stats().Role == ticker.RoleDeferring })
	s.killAndExpectTakeover(t, d, pid, done)
}

// A standby started with other flags changes no live setting and says so;
// when it becomes leader its settings apply.
func TestStandbyDoesNotRewriteLiveSettings(t *testing.T) {
	t.Parallel()
	s := newSetup(t) // tick_period_ms = 10
	serve := func(name string, period time.Duration) (*logBuf, context.CancelFunc, <-chan error) {
		b, log := newLog(t)
		ctx, cancel := context.WithCancel(s.ctx)
		done := make(chan error, 1)
		go func() {
			err := ticker.Serve(ctx, config.Connection{DSN: s.dsn, ConnectTimeout: 10 * time.Second},
				ticker.Options{Period: period}, log.With("daemon", name))
			done <- err
			done <- err // for the cleanup, after the test read it
		}()
		t.Cleanup(func() { cancel(); <-done })
		return b, cancel, done
	}
	_, cancelA, doneA := serve("leader", 10*time.Millisecond)
	eventually(t, "the first daemon leads", func() bool {
		var pid int32
		return s.conn.QueryRow(s.ctx, qLeaderPID, locks.ClassID, locks.TickerLeader).Scan(&pid) == nil
	})
	logB, _, _ := serve("standby", time.Second) // --hz 1
	eventually(t, "the second daemon stands by", func() bool { return logB.count("standing by") > 0 })
	var period string
	if err := s.conn.QueryRow(s.ctx, qSetting).Scan(&period); err != nil || period != "10" {
		t.Fatalf("a standby started with --hz 1 changed tick_period_ms to %q (%v); want the leader's 10", period, err)
	}
	eventually(t, "the standby warns with both values", func() bool {
		l := logB.String()
		return strings.Contains(l, "level=WARN") && strings.Contains(l, "live=10") && strings.Contains(l, "mine=1000")
	})
	cancelA()
	if err := <-doneA; err != nil {
		t.Fatalf("the leader's Serve: %v", err)
	}
	eventually(t, "the new leader applies its settings", func() bool {
		_ = s.conn.QueryRow(s.ctx, qSetting).Scan(&period)
		return period == "1000"
	})
}

// A database that is down when the daemon starts is retried (mapped errors
// in the log) until it comes up; the daemon's sessions are named
// "pgquectl ticker".
func TestServeRetriesUntilTheDatabaseIsUp(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	up, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close() // nothing listens there: the database is "down"
	dsn := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", port, up.User, up.Database)
	if up.Password != "" {
		dsn += " password=" + up.Password
	}
	logs, log := newLog(t)
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan error, 1)
	go func() {
		// ApplicationName as the root command passes it.
		done <- ticker.Serve(ctx, config.Connection{DSN: dsn, ConnectTimeout: 5 * time.Second, ApplicationName: "pgquectl"},
			ticker.Options{Period: 10 * time.Millisecond}, log)
	}()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "two failed attempts logged", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Serve exited while the database was down, want retries: %v", err)
		default:
		}
		return logs.count("cannot connect; will retry") >= 2
	})
	if out := logs.String(); !strings.Contains(out, "database server unreachable") || !strings.Contains(out, "check that PostgreSQL is running") {
		t.Fatalf("the connection failures are not logged through internal/db's mapping:\n%s", out)
	}

	// The database comes up: a proxy to the real server on that port.
	l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go proxy(l, up)
	var pid int32
	eventually(t, "the daemon leads once the database is up", func() bool {
		return s.conn.QueryRow(s.ctx, qLeaderPID, locks.ClassID, locks.TickerLeader).Scan(&pid) == nil
	})
	s.ticksAgain(t, "the daemon ticks")
	var app string
	if err := s.conn.QueryRow(s.ctx, qAppName, pid).Scan(&app); err != nil || app != ticker.AppName {
		t.Fatalf("application_name of the daemon's session = %q (%v), want %q", app, err, ticker.AppName)
	}
}

// proxy forwards every connection accepted on l to the server of cc.
func proxy(l net.Listener, cc *pgx.ConnConfig) {
	network, addr := "tcp", net.JoinHostPort(cc.Host, fmt.Sprint(cc.Port))
	if strings.HasPrefix(cc.Host, "/") {
		network, addr = "unix", filepath.Join(cc.Host, fmt.Sprintf(".s.PGSQL.%d", cc.Port))
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial(network, addr)
			if err != nil {
				return
			}
			defer u.Close()
			go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
			_, _ = io.Copy(c, u)
		}()
	}
}

// A permanent mistake (no such database) ends Serve with the mapped error
// instead of retrying forever.
func TestServeExitsOnAPermanentError(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	cc, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(s.dsn, cc.Database, cc.Database+"_missing", 1)
	ctx, cancel := context.WithTimeout(s.ctx, waitTimeout)
	defer cancel()
	err = ticker.Serve(ctx, config.Connection{DSN: dsn}, ticker.Options{Period: 10 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Serve on a missing database: %v, want the mapped 'database does not exist' error at once", err)
	}
}

// The stats line says the role, the tick rate and the lag.
func TestDaemonLogsStats(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	logs, log := newLog(t)
	d, _ := s.daemonWith(t, "a", func(c *ticker.Config) { c.StatsEvery = 200 * time.Millisecond; c.Logger = log })
	eventually(t, "the daemon leads", func() bool { return d.Stats().Role == ticker.RoleLeader })
	s.ticksAgain(t, "a tick")
	eventually(t, "a leader stats line", func() bool {
		l := logs.String()
		return strings.Contains(l, `msg="ticker stats" component=ticker role=leader ticks_per_sec=`) && strings.Contains(l, " lag=")
	})
	s.fakeLoop(t)
	eventually(t, "a deferring stats line", func() bool { return logs.count("role=deferring-to-pg_cron") > 0 })
}
