// Package ticker is the ticker daemon behind `pgquectl tick --run`: for
// databases without pg_cron it keeps one connection and calls
// pgque.ticker() at a fixed period (like PgQ's pgqd), plus the maintenance
// functions at their own slower cadence.
//
// One daemon leads per database: the leader holds the session advisory lock
// (locks.ClassID, locks.TickerLeader); the others stand by and poll the lock,
// so one of them takes over within a poll interval of the leader's session
// ending. Connection loss (a killed backend, a PostgreSQL restart) is met
// with reconnects under capped exponential back-off.
package ticker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/locks"
)

// Named queries: every statement the daemon runs.
const (
	qTryLeader = `SELECT pg_try_advisory_lock($1::int4, $2::int4)`
	qTick      = `SELECT pgque.ticker()`
	// qRetry moves due retry events back; called until it returns 0.
	qRetry = `SELECT pgque.maint_retry_events()`
	// qMaint runs the engine's periodic maintenance (event-table rotation
	// step 1 / step 2 and the rest of what pgque.maint() does).
	qMaint = `SELECT pgque.maint()`
	// qRotateMeta rotates the tick / subscription children when due.
	qRotateMeta = `SELECT pgque.rotate_metadata()`
	// qSessionSetup bounds every statement of the daemon's session.
	qSessionSetup = `SELECT set_config('statement_timeout', $1, false), set_config('lock_timeout', $2, false)`
)

// Config configures a Daemon.
type Config struct {
	// ConnConfig says how to reach the engine database (required).
	ConnConfig *pgx.ConnConfig
	// Period between calls of pgque.ticker() (required, > 0).
	Period time.Duration
	// MaintPeriod between maintenance rounds (retry draining, pgque.maint());
	// default 1 s.
	MaintPeriod time.Duration
	// MetaPeriod between calls of pgque.rotate_metadata(); default 200 ms
	// (as ticker_loop()).
	MetaPeriod time.Duration
	// RetryBudget bounds one round of draining retries; default 200 ms.
	RetryBudget time.Duration
	// StandbyPoll is how often a standby tries the leader lock; default 200 ms.
	StandbyPoll time.Duration
	// BackoffMin / BackoffMax bound reconnect back-off; default 100 ms / 5 s.
	BackoffMin, BackoffMax time.Duration
	// StatementTimeout bounds each statement server-side; default 5 s.
	StatementTimeout time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.ConnConfig == nil {
		return errors.New("ticker: ConnConfig is required")
	}
	if c.Period <= 0 {
		return errors.New("ticker: Period must be > 0 (pass --hz N or --period D)")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.MaintPeriod, time.Second)
	def(&c.MetaPeriod, 200*time.Millisecond)
	def(&c.RetryBudget, 200*time.Millisecond)
	def(&c.StandbyPoll, 200*time.Millisecond)
	def(&c.BackoffMin, 100*time.Millisecond)
	def(&c.BackoffMax, 5*time.Second)
	def(&c.StatementTimeout, 5*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Stats are the daemon's counters (safe to read while it runs).
type Stats struct {
	Leader     bool
	Rounds     int64 // calls of pgque.ticker()
	Ticks      int64 // ticks made (sum of ticker() results)
	Reconnects int64
	Elections  int64 // times this daemon became leader
	LastError  string
}

// Daemon is the ticker service: Start / Stop, or Run.
type Daemon struct {
	cfg Config
	log *slog.Logger

	leader     atomic.Bool
	rounds     atomic.Int64
	ticks      atomic.Int64
	reconnects atomic.Int64
	elections  atomic.Int64
	lastErr    atomic.Value // string

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

// New validates cfg and returns a daemon that is not running yet.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Daemon{cfg: cfg, log: cfg.Logger.With("component", "ticker")}, nil
}

// Start runs the daemon in the background until Stop or ctx ends.
func (d *Daemon) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done != nil {
		return errors.New("ticker: already started")
	}
	ctx, d.cancel = context.WithCancel(ctx)
	d.done = make(chan error, 1)
	go func() { d.done <- d.Run(ctx) }()
	return nil
}

// Stop asks the daemon to finish its current statement and leave, then
// waits for it (or for ctx). The leader lock goes with its session.
func (d *Daemon) Stop(ctx context.Context) error {
	d.mu.Lock()
	cancel, done := d.cancel, d.done
	d.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	select {
	case err := <-done:
		done <- err // let a second Stop see it too
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("stopping the ticker: %w", ctx.Err())
	}
}

// Stats returns a snapshot of the counters.
func (d *Daemon) Stats() Stats {
	s := Stats{
		Leader:     d.leader.Load(),
		Rounds:     d.rounds.Load(),
		Ticks:      d.ticks.Load(),
		Reconnects: d.reconnects.Load(),
		Elections:  d.elections.Load(),
	}
	if e, ok := d.lastErr.Load().(string); ok {
		s.LastError = e
	}
	return s
}

// Run ticks until ctx ends; it returns ctx's error.
func (d *Daemon) Run(ctx context.Context) error {
	backoff := d.cfg.BackoffMin
	first, yield := true, false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !first {
			d.reconnects.Add(1)
			wait := backoff
			if yield {
				// It led when the connection broke: give the standbys, which
				// poll every StandbyPoll, the first chance to take over.
				wait = max(wait, 2*d.cfg.StandbyPoll)
				yield = false
			}
			d.log.Info("reconnecting", "in", wait)
			if !sleepCtx(ctx, wait) {
				return ctx.Err()
			}
		}
		first = false
		conn, err := d.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d.setErr(err)
			d.log.Warn("cannot connect", "err", err)
			backoff = min(backoff*2, d.cfg.BackoffMax)
			continue
		}
		backoff = d.cfg.BackoffMin
		err = d.session(ctx, conn)
		yield = d.leader.Swap(false)
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			d.log.Info("stopped")
			return ctx.Err()
		}
		d.setErr(err)
		d.log.Warn("lost connection", "err", err)
	}
}

func (d *Daemon) connect(ctx context.Context) (*pgx.Conn, error) {
	cc := d.cfg.ConnConfig.Copy()
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = "pgquectl ticker"
	}
	timeout := cc.ConnectTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	st := fmt.Sprintf("%dms", d.cfg.StatementTimeout.Milliseconds())
	lt := fmt.Sprintf("%dms", max(d.cfg.Period.Milliseconds(), 100))
	if _, err := conn.Exec(cctx, qSessionSetup, st, lt); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("setting up the session: %w", err)
	}
	return conn, nil
}

// session runs standby then leader on one connection until it fails or ctx
// ends.
func (d *Daemon) session(ctx context.Context, conn *pgx.Conn) error {
	// Standby: poll the leader lock.
	for logged := false; ; {
		ok, err := d.tryLead(ctx, conn)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		if !logged {
			d.log.Info("standing by: another daemon leads this database", "poll", d.cfg.StandbyPoll)
			logged = true
		}
		if !sleepCtx(ctx, d.cfg.StandbyPoll) {
			return ctx.Err()
		}
	}
	d.leader.Store(true)
	d.elections.Add(1)
	pid := conn.PgConn().PID()
	d.log.Info("became leader", "db", conn.Config().Database, "backend_pid", pid, "period", d.cfg.Period)
	return d.lead(ctx, conn)
}

func (d *Daemon) tryLead(ctx context.Context, conn *pgx.Conn) (bool, error) {
	qctx, cancel := d.stmtCtx(ctx)
	defer cancel()
	var ok bool
	if err := conn.QueryRow(qctx, qTryLeader, locks.ClassID, locks.TickerLeader).Scan(&ok); err != nil {
		return false, fmt.Errorf("trying the leader lock: %w", err)
	}
	return ok, nil
}

// lead ticks at the period, on boundaries of the period (no drift), and
// runs maintenance every MaintPeriod.
func (d *Daemon) lead(ctx context.Context, conn *pgx.Conn) error {
	period := d.cfg.Period
	start := time.Now()
	next := start
	nextMaint := start.Add(d.cfg.MaintPeriod)
	nextMeta := start
	var sqlErrs int
	for {
		if err := d.tick(ctx, conn); err != nil {
			if fatal(ctx, conn, err) {
				return err
			}
			sqlErrs++
			if sqlErrs == 1 || sqlErrs%100 == 0 {
				d.setErr(err)
				d.log.Error("tick failed", "err", err, "count", sqlErrs)
			}
		} else {
			sqlErrs = 0
		}
		if now := time.Now(); !now.Before(nextMeta) {
			if err := d.exec(ctx, conn, qRotateMeta); err != nil {
				if fatal(ctx, conn, err) {
					return err
				}
				d.setErr(err)
				d.log.Error("metadata rotation failed", "err", err)
			}
			nextMeta = now.Add(d.cfg.MetaPeriod)
		}
		if now := time.Now(); !now.Before(nextMaint) {
			if err := d.maintain(ctx, conn); err != nil {
				if fatal(ctx, conn, err) {
					return err
				}
				d.setErr(err)
				d.log.Error("maintenance failed", "err", err)
			}
			nextMaint = now.Add(d.cfg.MaintPeriod)
		}
		// Sleep to the next boundary; when late, skip missed boundaries
		// instead of bursting.
		next = next.Add(period)
		if now := time.Now(); next.Before(now) {
			next = now.Add(period - now.Sub(start)%period)
		}
		if !sleepCtx(ctx, time.Until(next)) {
			return ctx.Err()
		}
	}
}

func (d *Daemon) tick(ctx context.Context, conn *pgx.Conn) error {
	qctx, cancel := d.stmtCtx(ctx)
	defer cancel()
	var n *int64
	if err := conn.QueryRow(qctx, qTick).Scan(&n); err != nil {
		return fmt.Errorf("pgque.ticker(): %w", err)
	}
	d.rounds.Add(1)
	if n != nil {
		d.ticks.Add(*n)
	}
	return nil
}

// maintain drains due retries (time-bounded), then runs the engine's
// maintenance (pgque.maint(): event-table rotation steps 1 and 2, one more
// retry pass, metadata rotation).
func (d *Daemon) maintain(ctx context.Context, conn *pgx.Conn) error {
	deadline := time.Now().Add(d.cfg.RetryBudget)
	for time.Now().Before(deadline) {
		qctx, cancel := d.stmtCtx(ctx)
		var n *int64
		err := conn.QueryRow(qctx, qRetry).Scan(&n)
		cancel()
		if err != nil {
			return fmt.Errorf("pgque.maint_retry_events(): %w", err)
		}
		if n == nil || *n == 0 {
			break
		}
	}
	return d.exec(ctx, conn, qMaint)
}

func (d *Daemon) exec(ctx context.Context, conn *pgx.Conn, q string) error {
	qctx, cancel := d.stmtCtx(ctx)
	defer cancel()
	if _, err := conn.Exec(qctx, q); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// stmtCtx bounds one statement client-side a little past the server's
// statement_timeout, so a dead network is noticed too.
func (d *Daemon) stmtCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.cfg.StatementTimeout+2*time.Second)
}

func (d *Daemon) setErr(err error) {
	if err != nil {
		d.lastErr.Store(err.Error())
	}
}

// fatal says whether err ends the session (connection gone or ctx done),
// as opposed to an SQL error the next round may not repeat.
func fatal(ctx context.Context, conn *pgx.Conn, err error) bool {
	if ctx.Err() != nil || conn.IsClosed() {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 57 (operator intervention: admin shutdown, terminated
		// backend), 08 (connection exception), 53 (resources).
		switch pe.Code[:2] {
		case "57", "08", "53":
			return pe.Code != "57014" // 57014 = statement timeout / cancel: keep the session
		}
		return false
	}
	return true // not a server error: the connection is in doubt
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
