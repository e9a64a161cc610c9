// Package ticker is the ticker daemon behind `pgquectl tick --run`: it keeps
// one connection and calls pgque.ticker() at a fixed period (like PgQ's
// pgqd), plus the maintenance functions at their own slower cadence.
//
// Roles. One daemon leads per database: the leader holds the session
// advisory lock (locks.ClassID, locks.TickerLeader); the others stand by and
// poll the lock, so one of them takes over within a poll interval of the
// leader's session ending. The leader itself defers to the pg_cron ticker:
// while a pgque.ticker_loop() run holds locks.TickerLoop ("the pg_cron loop
// is alive") the leader only watches that lock; when the lock has been free
// for a short confirmation window (LoopConfirm checks LoopPoll apart — pg_cron
// hands over between runs within milliseconds, so a free lock seen once is
// not yet a dead loop) it ticks, looking at the lock every LoopPoll, and it
// stops at the first look that finds the lock held again. So a daemon next to pg_cron is a fast-takeover
// standby: ticking resumes within about half a second of the loop's backend
// dying, instead of at pg_cron's next slot.
//
// Settings. Only the leader changes the engine's tick settings (Config.
// Settings, applied each time it becomes leader); a standby whose settings
// differ from the live ones logs both and changes nothing.
//
// Failures. Connection loss (a killed backend, a PostgreSQL restart, a
// server that is down when the daemon starts) is met with reconnects under
// capped exponential back-off; every error is logged through internal/db's
// mapping. A stats line (role, ticks/s, lag) is logged every StatsEvery.
package ticker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/cron"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/locks"
)

// AppName is the daemon's application_name (pg_stat_activity).
const AppName = "pgquectl ticker"

// Named queries: every statement the daemon runs.
const (
	qTryLeader = `SELECT pg_try_advisory_lock($1::int4, $2::int4)`
	// qLoopHeld says whether a session of this database holds the pg_cron
	// loop's liveness lock (locks.TickerLoop). It reads pg_locks rather
	// than try-locking, so it never delays or confuses a loop taking it.
	qLoopHeld = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_locks
	 WHERE locktype = 'advisory' AND granted AND objsubid = 2
	   AND classid = $1::int4::oid AND objid = $2::int4::oid
	   AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))`
	// qTickUnlessLoop ticks unless the pg_cron loop is alive; one round
	// trip per round. Returns (loop alive, ticks made or NULL).
	qTickUnlessLoop = `SELECT l.held, CASE WHEN l.held THEN NULL ELSE pgque.ticker() END
	  FROM (` + qLoopHeld + `) AS l(held)`
	// qTick ticks without looking at the loop's lock (the rounds between
	// two looks, LoopPoll apart: reading pg_locks every 10 ms round cost
	// more than an idle ticker()).
	qTick = `SELECT false, pgque.ticker()`
	// qRetry moves due retry events back; called until it returns 0.
	qRetry = `SELECT pgque.maint_retry_events()`
	// qMaint runs the engine's periodic maintenance (event-table rotation
	// step 1 / step 2 and the rest of what pgque.maint() does).
	qMaint = `SELECT pgque.maint()`
	// qRotateMeta rotates the tick / subscription children when due.
	qRotateMeta = `SELECT pgque.rotate_metadata()`
	// qSessionSetup bounds every statement of the daemon's session, and
	// lets its transactions (ticks, maintenance) commit without waiting for
	// the WAL flush: a tick's COMMIT is on the delivery path, and whatever
	// durable depends on a tick commits after it and flushes it too
	// (docs/design/engine.md, "Asynchronous commit of ticks").
	qSessionSetup = `SELECT set_config('statement_timeout', $1, false), set_config('lock_timeout', $2, false),
	                        set_config('synchronous_commit', 'off', false)`
	// qLag: the largest age of the last tick among queues that have events
	// not yet ticked (how long an event waits for a tick, at worst), in ms.
	qLag = `SELECT coalesce(round(extract(epoch FROM max(ticker_lag)) * 1000), 0)::bigint
	          FROM pgque.get_queue_info() WHERE ev_new > 0`
	// qLivePeriod / qLiveQueuePeriod / qLiveRotation read the live settings
	// a standby compares with its own.
	qLivePeriod      = `SELECT pgque.get_setting('tick_period_ms')`
	qLiveQueuePeriod = `SELECT queue_tick_period_ms::text FROM pgque.get_queue_info($1)`
	qLiveRotation    = `SELECT pgque.get_setting('meta_rotation_period_ms')`
)

// Role is what the daemon is doing.
type Role string

// Roles (the stats line's role).
const (
	RoleDisconnected Role = "disconnected"
	RoleStandby      Role = "standby"              // another daemon leads
	RoleLeader       Role = "leader"               // leads and ticks
	RoleDeferring    Role = "deferring-to-pg_cron" // leads, the pg_cron loop ticks
)

// Config configures a Daemon.
type Config struct {
	// ConnConfig says how to reach the engine database (required).
	ConnConfig *pgx.ConnConfig
	// Period between calls of pgque.ticker() (required, > 0).
	Period time.Duration
	// Settings, when set, are applied (Configure without pg_cron jobs) each
	// time this daemon becomes leader; a standby only compares them with the
	// live settings and logs a difference. Nil: the daemon never changes
	// settings.
	Settings *Options
	// MaintPeriod between maintenance rounds (retry draining, pgque.maint());
	// default 1 s.
	MaintPeriod time.Duration
	// MetaPeriod between calls of pgque.rotate_metadata(); default 100 ms (as ticker_loop)
	// (as ticker_loop()).
	MetaPeriod time.Duration
	// RetryBudget bounds one round of draining retries; default 200 ms.
	RetryBudget time.Duration
	// StandbyPoll is how often a standby tries the leader lock; default 200 ms.
	StandbyPoll time.Duration
	// LoopPoll is how often the leader checks the pg_cron loop's lock while
	// it defers to the loop; default 125 ms.
	LoopPoll time.Duration
	// LoopConfirm is how many further checks, LoopPoll apart, must find the
	// loop's lock free before the leader ticks; default 2 (~250 ms).
	LoopConfirm int
	// BackoffMin / BackoffMax bound reconnect back-off; default 100 ms / 5 s.
	BackoffMin, BackoffMax time.Duration
	// StatementTimeout bounds each statement server-side; default 5 s.
	StatementTimeout time.Duration
	// StatsEvery is the period of the stats log line; default 30 s.
	StatsEvery time.Duration
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
	def(&c.MetaPeriod, 100*time.Millisecond)
	def(&c.RetryBudget, 200*time.Millisecond)
	def(&c.StandbyPoll, 200*time.Millisecond)
	def(&c.LoopPoll, 125*time.Millisecond)
	def(&c.BackoffMin, 100*time.Millisecond)
	def(&c.BackoffMax, 5*time.Second)
	def(&c.StatementTimeout, 5*time.Second)
	def(&c.StatsEvery, 30*time.Second)
	if c.LoopConfirm <= 0 {
		c.LoopConfirm = 2
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Stats are the daemon's counters (safe to read while it runs).
type Stats struct {
	Role       Role
	Leader     bool  // holds the leader lock (ticking or deferring)
	Rounds     int64 // calls of pgque.ticker()
	Ticks      int64 // ticks made (sum of ticker() results)
	Reconnects int64
	Elections  int64 // times this daemon became leader
	Deferrals  int64 // times the leader found the pg_cron loop alive and stopped ticking
	Takeovers  int64 // times the leader started ticking after the loop was gone
	LastError  string
}

// Daemon is the ticker service: Start / Stop, or Run.
type Daemon struct {
	cfg Config
	log *slog.Logger

	role       atomic.Value // Role
	leader     atomic.Bool
	rounds     atomic.Int64
	ticks      atomic.Int64
	reconnects atomic.Int64
	elections  atomic.Int64
	deferrals  atomic.Int64
	takeovers  atomic.Int64
	lastErr    atomic.Value // string

	// The stats window; touched only by the Run goroutine.
	win struct {
		at            time.Time
		ticks, rounds int64
		maxLate       time.Duration
	}

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

// New validates cfg and returns a daemon that is not running yet.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Settings != nil {
		if err := ValidatePeriod(cfg.Settings.Period); err != nil {
			return nil, err
		}
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger.With("component", "ticker")}
	d.role.Store(RoleDisconnected)
	return d, nil
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
		Role:       d.role.Load().(Role),
		Leader:     d.leader.Load(),
		Rounds:     d.rounds.Load(),
		Ticks:      d.ticks.Load(),
		Reconnects: d.reconnects.Load(),
		Elections:  d.elections.Load(),
		Deferrals:  d.deferrals.Load(),
		Takeovers:  d.takeovers.Load(),
	}
	if e, ok := d.lastErr.Load().(string); ok {
		s.LastError = e
	}
	return s
}

// permanent says whether err is a mistake that retrying cannot fix (wrong
// password, no such database, engine not installed, missing privilege):
// before the first successful session the daemon exits with it instead of
// retrying forever.
func permanent(err error) bool {
	return errors.Is(err, db.ErrAuth) || errors.Is(err, db.ErrNoDatabase) ||
		errors.Is(err, db.ErrNotInstalled) || errors.Is(err, db.ErrPrivilege) ||
		errors.Is(err, errBadSettings)
}

var errBadSettings = errors.New("the tick settings were refused")

// Run ticks until ctx ends; it returns ctx's error, or a permanent error
// (see permanent) met before the first session got going.
func (d *Daemon) Run(ctx context.Context) error {
	backoff := d.cfg.BackoffMin
	first, yield, established := true, false, false
	attempt := 0
	d.win.at = time.Now()
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
			if attempt == 0 { // after a lost session; failed attempts log their own line
				d.log.Info("reconnecting", "in", wait)
			}
			if !sleepCtx(ctx, wait) {
				return ctx.Err()
			}
		}
		first = false
		d.setRole(RoleDisconnected)
		d.maybeStats(ctx, nil)
		conn, err := d.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			attempt++
			d.setErr(err)
			if !established && permanent(err) {
				d.log.Error("cannot connect; not retrying", "err", err)
				return err
			}
			backoff = min(backoff*2, d.cfg.BackoffMax)
			d.log.Warn("cannot connect; will retry", "err", err, "attempt", attempt, "retry_in", backoff)
			continue
		}
		attempt = 0
		backoff = d.cfg.BackoffMin
		err = d.session(ctx, conn, &established)
		yield = d.leader.Swap(false)
		d.setRole(RoleDisconnected)
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			d.log.Info("stopped")
			return ctx.Err()
		}
		err = db.MapError(err)
		d.setErr(err)
		if !established && permanent(err) {
			d.log.Error("giving up", "err", err)
			return err
		}
		d.log.Warn("lost the session; will reconnect", "err", err)
	}
}

func (d *Daemon) connect(ctx context.Context) (*pgx.Conn, error) {
	cc := d.cfg.ConnConfig.Copy()
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = AppName
	}
	timeout := cc.ConnectTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := db.ConnectConfig(cctx, cc)
	if err != nil {
		return nil, err // mapped, names the target
	}
	st := fmt.Sprintf("%dms", d.cfg.StatementTimeout.Milliseconds())
	lt := fmt.Sprintf("%dms", max(d.cfg.Period.Milliseconds(), 100))
	if _, err := conn.Exec(cctx, qSessionSetup, st, lt); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("setting up the session: %w", db.MapError(err))
	}
	return conn, nil
}

// session runs standby then leader on one connection until it fails or ctx
// ends. *established turns true once the daemon leads or stands by.
func (d *Daemon) session(ctx context.Context, conn *pgx.Conn, established *bool) error {
	d.setRole(RoleStandby)
	for logged := false; ; {
		ok, err := d.tryLead(ctx, conn)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		*established = true
		if !logged {
			d.log.Info("standing by: another daemon leads this database", "poll", d.cfg.StandbyPoll)
			d.compareSettings(ctx, conn)
			logged = true
		}
		d.maybeStats(ctx, conn)
		if !sleepCtx(ctx, d.cfg.StandbyPoll) {
			return ctx.Err()
		}
	}
	d.leader.Store(true)
	d.elections.Add(1)
	pid := conn.PgConn().PID()
	d.log.Info("became leader", "db", conn.Config().Database, "backend_pid", pid, "period", d.cfg.Period)
	if err := d.applySettings(ctx, conn); err != nil {
		return err
	}
	*established = true
	return d.lead(ctx, conn)
}

func (d *Daemon) tryLead(ctx context.Context, conn *pgx.Conn) (bool, error) {
	qctx, cancel := d.stmtCtx(ctx)
	defer cancel()
	var ok bool
	if err := conn.QueryRow(qctx, qTryLeader, locks.ClassID, locks.TickerLeader).Scan(&ok); err != nil {
		return false, fmt.Errorf("trying the leader lock: %w", db.MapError(err))
	}
	return ok, nil
}

// applySettings applies cfg.Settings (the leader's right alone) and says
// whether pg_cron jobs tick this database too.
func (d *Daemon) applySettings(ctx context.Context, conn *pgx.Conn) error {
	if d.cfg.Settings == nil {
		return nil
	}
	o := *d.cfg.Settings
	o.NoCron, o.DryRun = true, false
	p, err := Configure(ctx, conn, o)
	if err != nil {
		err = db.MapError(err)
		if !permanent(err) && !fatalErr(err) {
			err = fmt.Errorf("%w: %w", errBadSettings, err)
		}
		return fmt.Errorf("applying the tick settings as leader: %w", err)
	}
	d.log.Info("applied the tick settings", "period", o.Period, "queue", o.Queue, "rotation_period", p.Rotation,
		"rotation_derived", p.RotationDerived)
	if info, derr := cron.Detect(ctx, conn); derr == nil && info.Check() == nil {
		if jobs, _ := cron.Jobs(ctx, conn, info); len(jobs) > 0 {
			d.log.Info("pg_cron jobs of ours tick this database too: this daemon ticks only while their ticker loop is not running",
				"jobs", len(jobs))
		}
	}
	return nil
}

// compareSettings is the standby's part: log (WARN) when its settings
// differ from the live ones, change nothing.
func (d *Daemon) compareSettings(ctx context.Context, conn *pgx.Conn) {
	if d.cfg.Settings == nil {
		return
	}
	o := d.cfg.Settings
	qctx, cancel := d.stmtCtx(ctx)
	defer cancel()
	var live *string
	var err error
	if o.Queue == "" {
		err = conn.QueryRow(qctx, qLivePeriod).Scan(&live)
	} else {
		err = conn.QueryRow(qctx, qLiveQueuePeriod, o.Queue).Scan(&live)
	}
	if err != nil {
		d.log.Warn("standby: cannot read the live tick settings", "err", db.MapError(err))
		return
	}
	want := strconv.FormatInt(o.Period.Milliseconds(), 10)
	if live == nil || *live != want {
		d.log.Warn("standby: my tick settings differ from the live ones; the leader's stay, I change nothing",
			"setting", "tick_period_ms", "queue", o.Queue, "live", cmp.Or(db.Deref(live), "(default)"), "mine", want)
	}
	if o.Rotation > 0 {
		var rot *string
		if err := conn.QueryRow(qctx, qLiveRotation).Scan(&rot); err == nil {
			want := strconv.FormatInt(o.Rotation.Milliseconds(), 10)
			if rot == nil || *rot != want {
				d.log.Warn("standby: my tick settings differ from the live ones; the leader's stay, I change nothing",
					"setting", "meta_rotation_period_ms", "live", cmp.Or(db.Deref(rot), "(default)"), "mine", want)
			}
		}
	}
}

// lead ticks at the period, on boundaries of the period (no drift), and
// runs maintenance every MaintPeriod — while the pg_cron loop is not alive.
// It starts deferring (the loop's lock must be seen free LoopConfirm+1
// times before the first tick).
func (d *Daemon) lead(ctx context.Context, conn *pgx.Conn) error {
	period := d.cfg.Period
	deferring, free, announced := true, 0, false
	d.setRole(RoleDeferring)
	var start, next, nextMaint, nextMeta, nextLook time.Time
	var sqlErrs int
	for {
		d.maybeStats(ctx, conn)
		if deferring {
			held, err := d.loopHeld(ctx, conn)
			if err != nil {
				if fatal(ctx, conn, err) {
					return err
				}
				d.setErr(err)
				d.log.Error("checking the pg_cron loop's lock failed", "err", db.MapError(err))
			} else if held {
				if !announced {
					d.log.Info("the pg_cron ticker loop is running: deferring to it", "check_every", d.cfg.LoopPoll)
					announced = true
				}
				free = 0
			} else {
				free++
			}
			if free <= d.cfg.LoopConfirm {
				if !sleepCtx(ctx, d.cfg.LoopPoll) {
					return ctx.Err()
				}
				continue
			}
			deferring = false
			d.setRole(RoleLeader)
			if announced {
				d.takeovers.Add(1)
				d.log.Warn("the pg_cron ticker loop is gone: ticking until it returns",
					"confirmed_over", time.Duration(d.cfg.LoopConfirm)*d.cfg.LoopPoll)
			}
			announced = false
			start = time.Now()
			next, nextMaint, nextMeta = start, start.Add(d.cfg.MaintPeriod), start
		}
		if late := time.Since(next); late > d.win.maxLate {
			d.win.maxLate = late
		}
		// The loop's lock: looked at every LoopPoll while ticking (a loop
		// that came back ticks beside this daemon until then; the due rules
		// and the tick locks keep that from ticking a queue twice).
		look := !time.Now().Before(nextLook)
		if look {
			nextLook = time.Now().Add(d.cfg.LoopPoll)
		}
		held, err := d.tick(ctx, conn, look)
		switch {
		case err != nil:
			if fatal(ctx, conn, err) {
				return err
			}
			sqlErrs++
			if sqlErrs == 1 || sqlErrs%100 == 0 {
				d.setErr(err)
				d.log.Error("tick failed", "err", db.MapError(err), "count", sqlErrs)
			}
		case held:
			deferring, free, announced = true, 0, true
			d.deferrals.Add(1)
			d.setRole(RoleDeferring)
			d.log.Info("the pg_cron ticker loop is back: handing ticking back to it")
			continue
		default:
			sqlErrs = 0
		}
		if now := time.Now(); !now.Before(nextMeta) {
			if err := d.exec(ctx, conn, qRotateMeta); err != nil {
				if fatal(ctx, conn, err) {
					return err
				}
				d.setErr(err)
				d.log.Error("metadata rotation failed", "err", db.MapError(err))
			}
			nextMeta = now.Add(d.cfg.MetaPeriod)
		}
		if now := time.Now(); !now.Before(nextMaint) {
			if err := d.maintain(ctx, conn); err != nil {
				if fatal(ctx, conn, err) {
					return err
				}
				d.setErr(err)
				d.log.Error("maintenance failed", "err", db.MapError(err))
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

func (d *Daemon) loopHeld(ctx context.Context, conn *pgx.Conn) (bool, error) {
	qctx, cancel := d.stmtCtx(ctx)
	defer cancel()
	var held bool
	if err := conn.QueryRow(qctx, qLoopHeld, locks.ClassID, locks.TickerLoop).Scan(&held); err != nil {
		return false, fmt.Errorf("checking the pg_cron loop's lock: %w", err)
	}
	return held, nil
}

// tick runs one round unless (look) the pg_cron loop is alive (held =
// true: no round was run); without look it runs the round.
func (d *Daemon) tick(ctx context.Context, conn *pgx.Conn, look bool) (held bool, err error) {
	qctx, cancel := d.stmtCtx(ctx)
	defer cancel()
	var n *int64
	var row pgx.Row
	if look {
		row = conn.QueryRow(qctx, qTickUnlessLoop, locks.ClassID, locks.TickerLoop)
	} else {
		row = conn.QueryRow(qctx, qTick)
	}
	if err := row.Scan(&held, &n); err != nil {
		return false, fmt.Errorf("pgque.ticker(): %w", err)
	}
	if held {
		return true, nil
	}
	d.rounds.Add(1)
	if n != nil {
		d.ticks.Add(*n)
	}
	return false, nil
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

// maybeStats logs the stats line when StatsEvery has passed: role, ticks
// and rounds per second over the window, the latest round start past its
// boundary, and (with a connection, while it ticks) the tick lag: the
// largest age of the last tick among queues with events not yet ticked.
func (d *Daemon) maybeStats(ctx context.Context, conn *pgx.Conn) {
	now := time.Now()
	el := now.Sub(d.win.at)
	if el < d.cfg.StatsEvery {
		return
	}
	ticks, rounds := d.ticks.Load(), d.rounds.Load()
	secs := el.Seconds()
	attrs := []any{"role", d.role.Load().(Role),
		"ticks_per_sec", round1(float64(ticks-d.win.ticks) / secs),
		"rounds_per_sec", round1(float64(rounds-d.win.rounds) / secs),
		"max_round_late", d.win.maxLate.Round(time.Millisecond),
		"reconnects", d.reconnects.Load(), "takeovers", d.takeovers.Load(), "deferrals", d.deferrals.Load()}
	// The lag only while this daemon ticks: get_queue_info() reads every
	// queue's unticked events (tens of ms), and while the pg_cron loop or
	// another daemon ticks, the lag is theirs to report.
	if conn != nil && d.role.Load().(Role) == RoleLeader {
		qctx, cancel := d.stmtCtx(ctx)
		var lagMs int64
		if err := conn.QueryRow(qctx, qLag).Scan(&lagMs); err == nil {
			attrs = append(attrs, "lag", time.Duration(lagMs)*time.Millisecond)
		}
		cancel()
	}
	d.log.Info("ticker stats", attrs...)
	d.win.at, d.win.ticks, d.win.rounds, d.win.maxLate = now, ticks, rounds, 0
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

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

func (d *Daemon) setRole(r Role) { d.role.Store(r) }

// fatal says whether err ends the session (connection gone or ctx done),
// as opposed to an SQL error the next round may not repeat.
func fatal(ctx context.Context, conn *pgx.Conn, err error) bool {
	if ctx.Err() != nil || conn.IsClosed() {
		return true
	}
	return fatalErr(err)
}

// fatalErr: a server error of the connection-exception, operator-
// intervention (admin shutdown, terminated backend; not a statement
// timeout or cancel) or insufficient-resources classes, or any error that
// is not a server error (the connection is in doubt).
func fatalErr(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return true
	}
	switch {
	case pe.Code == pgerrcode.QueryCanceled:
		return false
	case pgerrcode.IsConnectionException(pe.Code), pgerrcode.IsOperatorIntervention(pe.Code),
		pgerrcode.IsInsufficientResources(pe.Code):
		return true
	}
	return false
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

// Serve is `pgquectl tick --run`: it runs the daemon until ctx ends
// (SIGTERM / SIGINT). The daemon applies o's settings (no pg_cron jobs)
// only when it becomes leader; a database that is down at start is
// retried with back-off. It returns nil on ctx's end.
func Serve(ctx context.Context, c config.Connection, o Options, log *slog.Logger) error {
	o.NoCron, o.DryRun = true, false
	c.ApplicationName = AppName // unless the DSN sets one
	cc, err := db.ParseConfig(c)
	if err != nil {
		return err
	}
	d, err := New(Config{ConnConfig: cc, Period: o.Period, Settings: &o, Logger: log})
	if err != nil {
		return err
	}
	if err := d.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
