package ticker_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/locks"
	"github.com/pgquectl/pgquectl/internal/pgtest"
	"github.com/pgquectl/pgquectl/internal/ticker"
)

// Statements of the tests.
const (
	qCreateQueue  = `SELECT pgque.create_queue($1)`
	qSetPeriod    = `SELECT pgque.set_tick_period_ms($1::int)`
	qSend         = `SELECT pgque.send($1, '{}'::text)`
	qLastTick     = `SELECT coalesce(max(tick_id), 0) FROM pgque.tick t JOIN pgque.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = $1`
	qLeaderPID    = `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid::int = $1 AND objid::int = $2 AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
	qTerminate    = `SELECT pg_terminate_backend($1)`
	qTryLeaderNow = `SELECT pg_try_advisory_lock($1::int4, $2::int4)`
)

// waitTimeout bounds every wait for behaviour; the tests assert that things
// happen, not how fast (timing targets live in bench/).
const waitTimeout = 30 * time.Second

type setup struct {
	ctx  context.Context
	dsn  string
	conn *pgx.Conn
}

func newSetup(t *testing.T) setup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	dsn := pgtest.NewDB(t)
	s := setup{ctx: ctx, dsn: dsn, conn: pgtest.Conn(t, dsn)}
	s.exec(t, qCreateQueue, "q")
	// A classic consumer: the engine ticks a queue at its tick period only
	// while one reads it (consumer groups need no ticks).
	s.exec(t, `SELECT pgque.subscribe('q', 'c')`)
	s.exec(t, qSetPeriod, 10)
	return s
}

func (s setup) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := s.conn.Exec(s.ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (s setup) lastTick(t *testing.T) int64 {
	t.Helper()
	var id int64
	if err := s.conn.QueryRow(s.ctx, qLastTick, "q").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// daemon starts a ticker daemon on s's database, stopped at cleanup.
func (s setup) daemon(t *testing.T, name string) (*ticker.Daemon, context.CancelFunc) {
	t.Helper()
	return s.daemonWith(t, name, nil)
}

// daemonWith is daemon with a hook that adjusts the config before New.
func (s setup) daemonWith(t *testing.T, name string, adjust func(*ticker.Config)) (*ticker.Daemon, context.CancelFunc) {
	t.Helper()
	cc, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	cfg := ticker.Config{ConnConfig: cc, Period: 10 * time.Millisecond, StandbyPoll: 100 * time.Millisecond,
		BackoffMin: 50 * time.Millisecond, BackoffMax: time.Second, Logger: log.With("daemon", name)}
	if adjust != nil {
		adjust(&cfg)
	}
	d, err := ticker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		if err := d.Stop(sctx); err != nil {
			t.Errorf("Stop %s: %v", name, err)
		}
	})
	return d, cancel
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// eventually polls cond until it holds or waitTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", waitTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ticksAgain sends an event and waits for a tick newer than the current one.
func (s setup) ticksAgain(t *testing.T, what string) {
	t.Helper()
	before := s.lastTick(t)
	s.exec(t, qSend, "q")
	eventually(t, what, func() bool { return s.lastTick(t) > before })
}

func TestDaemonTicks(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	before := s.lastTick(t)
	d, _ := s.daemon(t, "a")
	eventually(t, "the daemon leads", func() bool { return d.Stats().Leader })
	s.ticksAgain(t, "a tick after an event")
	s.ticksAgain(t, "a second tick after a second event")
	// The stats are published after each round: on a loaded machine the
	// round that made the second tick may not have reported yet.
	eventually(t, "the stats count several rounds and ticks", func() bool {
		st := d.Stats()
		return st.Rounds >= 2 && st.Ticks >= 2
	})
	if s.lastTick(t) <= before {
		t.Fatalf("stats %+v: no tick after %d", d.Stats(), before)
	}
}

func TestDaemonIdleQueueDoesNotTick(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	d, _ := s.daemon(t, "a")
	s.ticksAgain(t, "a tick after an event") // ticking works
	eventually(t, "the daemon ran more rounds", func() bool { return d.Stats().Rounds > 50 })
	last := s.lastTick(t)
	rounds := d.Stats().Rounds
	eventually(t, "100 more rounds", func() bool { return d.Stats().Rounds > rounds+100 })
	// The engine may re-tick once after a tick when a transaction that was
	// in progress at it ends (any database's: xids are cluster-wide, and
	// other tests run beside this one); never more.
	if got := s.lastTick(t); got > last+1 {
		t.Fatalf("an idle queue ticked: last tick %d -> %d over 100 rounds at a 10 ms period", last, got)
	}
}

func TestLeaderFailoverOnBackendKill(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	a, _ := s.daemon(t, "a")
	b, _ := s.daemon(t, "b")
	eventually(t, "one daemon leads", func() bool { return a.Stats().Leader || b.Stats().Leader })
	time.Sleep(300 * time.Millisecond) // let the other try the lock a few times
	if a.Stats().Leader && b.Stats().Leader {
		t.Fatal("two leaders on one database")
	}
	leader, standby := a, b
	if b.Stats().Leader {
		leader, standby = b, a
	}
	s.ticksAgain(t, "the leader ticks")
	if standby.Stats().Rounds != 0 {
		t.Fatalf("the standby ticked: %+v", standby.Stats())
	}

	var pid int32
	if err := s.conn.QueryRow(s.ctx, qLeaderPID, locks.ClassID, locks.TickerLeader).Scan(&pid); err != nil {
		t.Fatalf("finding the leader's backend: %v", err)
	}
	s.exec(t, qTerminate, pid)

	eventually(t, "the standby takes over", func() bool { return standby.Stats().Leader })
	eventually(t, "the killed leader reconnects", func() bool { return leader.Stats().Reconnects > 0 })
	rounds := standby.Stats().Rounds
	s.ticksAgain(t, "ticks after the failover")
	eventually(t, "the new leader's rounds", func() bool { return standby.Stats().Rounds > rounds })
	if leader.Stats().Leader && standby.Stats().Leader {
		t.Fatal("two leaders after the failover")
	}
}

func TestLeaderFailoverOnStop(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	a, cancelA := s.daemon(t, "a")
	eventually(t, "a leads", func() bool { return a.Stats().Leader })
	b, _ := s.daemon(t, "b")
	time.Sleep(300 * time.Millisecond)
	if b.Stats().Leader {
		t.Fatal("b leads while a holds the lock")
	}
	cancelA() // the leader's context ends: it leaves and closes its session
	eventually(t, "b takes over", func() bool { return b.Stats().Leader })
	s.ticksAgain(t, "b ticks")
}

func TestDaemonSurvivesBackendKill(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	d, _ := s.daemon(t, "a")
	eventually(t, "the daemon leads", func() bool { return d.Stats().Leader })
	for i := range 2 {
		var pid int32
		if err := s.conn.QueryRow(s.ctx, qLeaderPID, locks.ClassID, locks.TickerLeader).Scan(&pid); err != nil {
			t.Fatalf("kill %d: finding the daemon's backend: %v", i, err)
		}
		elections := d.Stats().Elections
		s.exec(t, qTerminate, pid)
		eventually(t, "the daemon leads again", func() bool { return d.Stats().Elections > elections && d.Stats().Leader })
		s.ticksAgain(t, "ticks after the reconnect")
	}
	if d.Stats().Reconnects < 2 {
		t.Fatalf("stats %+v: want 2 reconnects", d.Stats())
	}
}

func TestStopReleasesTheLeaderLock(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	cc, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ticker.New(ticker.Config{ConnConfig: cc, Period: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(s.ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the daemon leads", func() bool { return d.Stats().Leader })
	var got bool
	if err := s.conn.QueryRow(s.ctx, qTryLeaderNow, locks.ClassID, locks.TickerLeader).Scan(&got); err != nil || got {
		t.Fatalf("took the leader lock while the daemon leads: %v %v", got, err)
	}
	sctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	if err := d.Stop(sctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	eventually(t, "the lock is free after Stop", func() bool {
		var ok bool
		_ = s.conn.QueryRow(s.ctx, qTryLeaderNow, locks.ClassID, locks.TickerLeader).Scan(&ok)
		return ok
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := ticker.New(ticker.Config{Period: time.Millisecond}); err == nil {
		t.Error("New without ConnConfig: no error")
	}
	if _, err := ticker.New(ticker.Config{ConnConfig: &pgx.ConnConfig{}}); err == nil {
		t.Error("New without Period: no error")
	}
}

func TestServeSetsThePeriodAndTicksUntilCancelled(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	s.exec(t, qSetPeriod, 1000) // Serve must set 20 ms
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan error, 1)
	go func() {
		done <- ticker.Serve(ctx, config.Connection{DSN: s.dsn, ConnectTimeout: 10 * time.Second},
			ticker.Options{Period: 20 * time.Millisecond}, slog.New(slog.DiscardHandler))
	}()
	s.ticksAgain(t, "Serve ticks")
	var period string
	if err := s.conn.QueryRow(s.ctx, `SELECT pgque.get_setting('tick_period_ms')`).Scan(&period); err != nil || period != "20" {
		t.Fatalf("tick_period_ms = %q (%v), want 20", period, err)
	}
	cancel() // what SIGTERM does through signal.NotifyContext
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v after cancel, want nil", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Serve did not return after its context was cancelled")
	}
}
