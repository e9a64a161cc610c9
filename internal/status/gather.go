package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/cron"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/locks"
	"github.com/pgquectl/pgquectl/internal/pgstats"
)

// Options configure a [Collector].
type Options struct {
	// Conn says how to reach the engine database. The pg_cron database, when
	// it is another one, is reached with the same settings and credentials.
	Conn config.Connection
	// Sample is how long WAL is sampled on the first collection (0: no WAL
	// rate). Later collections of the same Collector measure since the
	// previous one.
	Sample time.Duration
	// Thresholds decide the levels; zero value: use DefaultThresholds().
	Thresholds Thresholds
	// QueryTimeout bounds every query (default 10 s).
	QueryTimeout time.Duration
	// Log receives debug lines; nil discards them.
	Log *slog.Logger
}

// Collector gathers reports from one database. It keeps its connections
// and the previous WAL reading between collections (--watch); it is not
// safe for concurrent use.
type Collector struct {
	opts     Options
	conn     *pgx.Conn
	cronConn *pgx.Conn // nil, or a connection to cron.database_name when that is another database
	cronDB   string
	prev     *sample
}

// sample is a WAL reading plus the tick ids it goes with.
type sample struct {
	wal   pgstats.WALPoint
	ticks map[string]int64
	local time.Time
}

// NewCollector prepares a collector; it connects on the first Collect.
func NewCollector(opts Options) *Collector {
	if opts.Thresholds == (Thresholds{}) {
		opts.Thresholds = DefaultThresholds()
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = pgstats.DefaultTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Collector{opts: opts}
}

// Close closes the collector's connections.
func (c *Collector) Close(ctx context.Context) {
	for _, conn := range []*pgx.Conn{c.cronConn, c.conn} {
		if conn != nil {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
	}
	c.conn, c.cronConn, c.prev = nil, nil, nil
}

// sessionParams make every status session read-only and unable to wait
// long for a lock: status never writes and must not queue behind a
// rotation's TRUNCATE.
var sessionParams = map[string]string{
	"default_transaction_read_only": "on",
	"lock_timeout":                  "2s",
}

func (c *Collector) connect(ctx context.Context) error {
	if c.conn != nil && !c.conn.IsClosed() {
		return nil
	}
	c.Close(ctx)
	cfg, err := db.ParseConfig(c.opts.Conn)
	if err != nil {
		return err
	}
	for k, v := range sessionParams {
		cfg.RuntimeParams[k] = v
	}
	conn, err := db.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	c.conn = conn
	return nil
}

// qctx bounds one query.
func (c *Collector) qctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.QueryTimeout)
}

// ErrInterrupted: the collection was cancelled (Ctrl-C) before it finished;
// the report is incomplete and says nothing about the database.
var ErrInterrupted = errors.New("interrupted")

func interrupted(r *Report) (*Report, error) {
	r.Error = "interrupted before the report was complete"
	finish(r)
	return r, ErrInterrupted
}

// Collect gathers one report. The error is non-nil only when the database
// cannot be read at all (classified by internal/db: errors.Is(err,
// db.ErrUnreachable), db.ErrAuth, ...) or the collection was interrupted
// (ErrInterrupted); the returned report then carries Level UNKNOWN and the
// error text. Everything else (unreadable
// sections, missing engine) is reported inside the report.
func (c *Collector) Collect(ctx context.Context) (*Report, error) {
	began := time.Now()
	r := &Report{Time: began, Thresholds: c.opts.Thresholds}
	fail := func(err error) (*Report, error) {
		if errors.Is(ctx.Err(), context.Canceled) {
			return interrupted(r)
		}
		r.Error = err.Error()
		finish(r)
		return r, err
	}
	if err := c.connect(ctx); err != nil {
		return fail(err)
	}
	qctx, cancel := c.qctx(ctx)
	sess, err := pgstats.Session(qctx, c.conn)
	cancel()
	if err != nil {
		c.Close(ctx)
		return fail(err)
	}
	r.Session = &sess
	r.Time = sess.Now

	c.engine(ctx, r)

	// The WAL sample spans the rest of the collection.
	start := c.prev
	if start == nil && c.opts.Sample > 0 {
		start = c.readSample(ctx, r)
	}

	c.bloat(ctx, r)
	c.xmin(ctx, r)
	c.cron(ctx, r)
	for _, sc := range serverChecks {
		qctx, cancel := c.qctx(ctx)
		sc.collect(qctx, c.conn, r)
		cancel()
	}
	c.consumers(ctx, r)

	if start != nil && c.prev == nil {
		wait := time.Until(start.local.Add(c.opts.Sample))
		if wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return fail(fmt.Errorf("sampling WAL: %w", ctx.Err()))
			case <-timer.C:
			}
		}
	}
	c.queues(ctx, r) // after the wait: the freshest tick lag
	if r.Engine.Installed && r.Engine.SchemaUsage {
		qctx, cancel := c.qctx(ctx)
		if g, err := pgstats.LongestTickGap(qctx, c.conn); err == nil {
			r.Cron.TickGap = g
		} else {
			c.opts.Log.Debug("status: tick gaps not readable", "err", err) // needs more than pgque_reader
		}
		cancel()
	}
	if start != nil {
		if end := c.readSample(ctx, r); end != nil {
			c.walRate(r, start, end)
			c.prev = end
		}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return interrupted(r) // what was read after the interrupt is incomplete
	}
	c.judgeTicking(r)
	if c.conn.IsClosed() {
		c.Close(ctx) // reconnect on the next collection
	}
	finish(r)
	c.opts.Log.Debug("status: collected", "database", r.Session.Database, "level", r.Level,
		"checks", len(r.Checks), "took", time.Since(began).Round(time.Millisecond))
	return r, nil
}

// readSample reads the WAL position and the last tick id per queue.
func (c *Collector) readSample(ctx context.Context, r *Report) *sample {
	qctx, cancel := c.qctx(ctx)
	defer cancel()
	p, err := pgstats.ReadWAL(qctx, c.conn)
	if err != nil {
		r.WAL.Problems = appendProblem(r.WAL.Problems, "the WAL position", err, r)
		return nil
	}
	s := &sample{wal: p, local: time.Now(), ticks: map[string]int64{}}
	if r.Engine.Installed && r.Engine.SchemaUsage {
		if qs, err := pgstats.Queues(qctx, c.conn); err == nil {
			for _, q := range qs {
				if q.LastTickID != nil {
					s.ticks[q.Name] = *q.LastTickID
				}
			}
		}
	}
	return s
}

func (c *Collector) walRate(r *Report, start, end *sample) {
	rate := pgstats.Rate(start.wal, end.wal)
	r.WAL.Sampled, r.WAL.Rate = true, &rate
	r.WAL.TickWALBytes = pgstats.TickWALBytesEstimate
	for i := range r.Queues.Rows {
		q := &r.Queues.Rows[i]
		before, okBefore := start.ticks[q.Name]
		after, okAfter := end.ticks[q.Name]
		if okBefore && okAfter && after >= before {
			n := after - before
			q.TicksInSample = &n
			r.WAL.Ticks += n
		}
	}
	r.WAL.TickBytes = r.WAL.Ticks * r.WAL.TickWALBytes
	if rate.Bytes > 0 {
		r.WAL.TickShare = min(1, float64(r.WAL.TickBytes)/float64(rate.Bytes))
	}
}

func (c *Collector) engine(ctx context.Context, r *Report) {
	qctx, cancel := c.qctx(ctx)
	defer cancel()
	e, err := pgstats.ReadEngine(qctx, c.conn)
	r.Engine.Engine = e
	switch {
	case err != nil && e.Installed && e.SchemaUsage && errors.Is(err, pgstats.ErrPermission):
		r.Engine.Verdict = ok("installed (version not readable by %s)", r.Session.User)
	case err != nil:
		r.Engine.Problems = appendProblem(r.Engine.Problems, "the pgque engine", err, r)
		r.Engine.Verdict = unknown("could not check the engine: %v", err)
		return
	case !e.Installed:
		r.Engine.Verdict = crit("pgque is not installed in database %s: run pgquectl install", r.Session.Database)
		return
	case !e.SchemaUsage:
		r.Engine.Verdict = unknown("%s may not use schema pgque", r.Session.User)
		r.Engine.Problems = append(r.Engine.Problems, Problem{What: "schema pgque (queues, consumers)",
			Fix: fmt.Sprintf("GRANT pgque_reader TO %s", quoteIdent(r.Session.User))})
		return
	default:
		r.Engine.Verdict = ok("version %s", e.Version)
	}
	// Both need more than pgque_reader (pgque_admin / table SELECT): shown
	// when readable, silently left out otherwise.
	if p, err := pgstats.MetaRotationPeriod(qctx, c.conn); err == nil {
		r.Engine.MetaRotationPeriod = &p
	} else {
		c.opts.Log.Debug("status: meta rotation period not readable", "err", err)
	}
	if t, err := pgstats.LastMetaRotation(qctx, c.conn); err == nil {
		r.Engine.LastMetaRotation = t
	} else {
		c.opts.Log.Debug("status: last metadata rotation not readable", "err", err)
	}
}

func (c *Collector) queues(ctx context.Context, r *Report) {
	if !r.Engine.Installed || !r.Engine.SchemaUsage {
		return
	}
	qctx, cancel := c.qctx(ctx)
	defer cancel()
	qs, err := pgstats.Queues(qctx, c.conn)
	if err != nil {
		r.Queues.Problems = appendProblem(r.Queues.Problems, "pgque.get_queue_info()", err, r)
		return
	}
	slowest := map[string]pgstats.ConsumerInfo{}
	classic := map[string]bool{}
	for _, co := range r.Consumers.Rows {
		classic[co.Queue] = true
		s, seen := slowest[co.Queue]
		if co.LastTick != nil && (!seen || s.LastTick == nil || *co.LastTick < *s.LastTick) {
			slowest[co.Queue] = co.ConsumerInfo
		}
	}
	for _, q := range qs {
		row := QueueRow{QueueInfo: q}
		if q.SwitchTime != nil {
			s := r.Session.Now.Sub(*q.SwitchTime).Seconds()
			row.SinceRotation = &s
		}
		if s, found := slowest[q.Name]; found {
			row.PinnedBy, row.PinnedByLag = s.Consumer, s.Lag
		}
		// Consumers unreadable: judged as without (never a false WARN
		// for a queue the engine correctly ticks slowly).
		row.NoClassicConsumer = !classic[q.Name] || len(r.Consumers.Problems) > 0
		row.Verdict = queueVerdict(&row, r.Thresholds)
		r.Queues.Rows = append(r.Queues.Rows, row)
	}
}

func (c *Collector) consumers(ctx context.Context, r *Report) {
	if !r.Engine.Installed || !r.Engine.SchemaUsage {
		return
	}
	qctx, cancel := c.qctx(ctx)
	defer cancel()
	cs, err := pgstats.Consumers(qctx, c.conn)
	if err != nil {
		r.Consumers.Problems = appendProblem(r.Consumers.Problems, "pgque.get_consumer_info()", err, r)
		return
	}
	for _, co := range cs {
		r.Consumers.Rows = append(r.Consumers.Rows, ConsumerRow{ConsumerInfo: co, Verdict: consumerVerdict(co, r.Thresholds)})
	}
}

func (c *Collector) bloat(ctx context.Context, r *Report) {
	if !r.Engine.Installed {
		return
	}
	qctx, cancel := c.qctx(ctx)
	defer cancel()
	ts, err := pgstats.TableStats(qctx, c.conn, "pgque")
	if err != nil {
		r.Bloat.Problems = appendProblem(r.Bloat.Problems, "pg_stat_user_tables", err, r)
		return
	}
	method, err := pgstats.MeasureDead(qctx, c.conn, "pgque", ts)
	if err != nil {
		// The statistics' counts stay; say why they may overcount.
		c.opts.Log.Debug("status: measuring dead tuples of the metadata tables", "err", err)
		method = pgstats.DeadByStats
	}
	r.Bloat.MetadataMethod = method
	r.Bloat.Tables = ts
	r.Bloat.Families = families(ts, r.Thresholds)
}

func (c *Collector) xmin(ctx context.Context, r *Report) {
	qctx, cancel := c.qctx(ctx)
	defer cancel()
	user := r.Session.User
	x := &r.Xmin
	var old oldest
	defer func() {
		x.Oldest = ok("no session of this database holds the xmin horizon")
		if old.found {
			x.Oldest = old.v
		}
	}()
	if bs, err := pgstats.XminBackends(qctx, c.conn); err != nil {
		x.Problems = appendProblem(x.Problems, "pg_stat_activity", err, r)
	} else {
		for _, b := range bs {
			v := backendVerdict(b, user, r.Thresholds)
			x.Backends = append(x.Backends, BackendRow{Backend: b, Verdict: v})
			if v.Level == Unknown {
				x.Hidden++
				continue
			}
			if b.SameDatabase || b.Database == "" {
				old.add(v)
			}
		}
	}
	if ps, err := pgstats.PreparedXacts(qctx, c.conn); err != nil {
		x.Problems = appendProblem(x.Problems, "pg_prepared_xacts", err, r)
	} else {
		for _, p := range ps {
			v := preparedVerdict(p, r.Thresholds)
			x.Prepared = append(x.Prepared, PreparedRow{PreparedXact: p, Verdict: v})
			if p.SameDatabase {
				old.add(v)
			}
		}
	}
	if ss, err := pgstats.Slots(qctx, c.conn); err != nil {
		x.Problems = appendProblem(x.Problems, "pg_replication_slots", err, r)
	} else {
		for _, s := range ss {
			v := slotVerdict(s)
			x.Slots = append(x.Slots, SlotRow{Slot: s, Verdict: v})
			if v.Level != OK {
				old.add(v)
			}
		}
	}
	if x.Hidden > 0 {
		x.Problems = append(x.Problems, Problem{
			What: fmt.Sprintf("the age of %d xmin-holding session(s) of other roles (pg_stat_activity hides their state and timestamps from %s)", x.Hidden, user),
			Fix:  fmt.Sprintf("GRANT pg_monitor TO %s", quoteIdent(user)),
		})
	}
}

// oldest keeps the more severe verdict; among OK verdicts the first one
// added wins: sessions come first, oldest first, so an all-OK check names
// the oldest session.
type oldest struct {
	v     Verdict
	found bool
}

func (o *oldest) add(v Verdict) {
	if !o.found {
		o.v, o.found = v, true
		return
	}
	o.v = worse(o.v, v)
}

// cron reads pg_cron's jobs of this database (in cron.database_name) and
// the ticker daemon's leader.
func (c *Collector) cron(ctx context.Context, r *Report) {
	cs := &r.Cron
	qctx, cancel := c.qctx(ctx)
	defer cancel()
	holders, err := pgstats.AdvisoryHolders(qctx, c.conn, locks.ClassID, locks.TickerLeader)
	if err != nil {
		cs.Problems = appendProblem(cs.Problems, "pg_locks (ticker daemon leader)", err, r)
	}
	cs.Daemon = holders
	if cs.Loop, err = pgstats.AdvisoryHolders(qctx, c.conn, locks.ClassID, locks.TickerLoop); err != nil {
		cs.Problems = appendProblem(cs.Problems, "pg_locks (pg_cron loop)", err, r)
	}

	settings, err := cron.ReadSettings(qctx, c.conn)
	if err != nil {
		cs.Problems = appendProblem(cs.Problems,
			"pg_cron's settings (cron.database_name is readable only by superusers and members of pg_read_all_settings)", err, r)
		return
	}
	cs.Settings = settings
	if !settings.Loaded {
		return
	}
	cronConn, err := c.cronConnection(ctx, settings.DatabaseName, r.Session.Database)
	if err != nil {
		cs.Problems = append(cs.Problems, Problem{
			What:  fmt.Sprintf("pg_cron's database %s (cron.database_name)", settings.DatabaseName),
			Fix:   fmt.Sprintf("let %s connect there: GRANT CONNECT ON DATABASE %s TO %s, and allow it in pg_hba.conf", r.Session.User, quoteIdent(settings.DatabaseName), quoteIdent(r.Session.User)),
			Error: err.Error(),
		})
		return
	}
	access, err := cron.ReadAccess(qctx, cronConn)
	if err != nil {
		cs.Problems = appendProblem(cs.Problems, "the pg_cron extension", err, r)
		return
	}
	cs.Access = access
	switch {
	case !access.Installed:
		return // loaded but not created: pg_cron is not in use here
	case !access.SchemaUsage:
		cs.Problems = append(cs.Problems, Problem{
			What: fmt.Sprintf("pg_cron jobs and run history (schema cron in database %s)", settings.DatabaseName),
			Fix:  fmt.Sprintf("in database %s: GRANT USAGE ON SCHEMA cron TO %s", settings.DatabaseName, quoteIdent(r.Session.User)),
		})
		return
	}
	// Which jobs are ours is the engine's answer (exact names).
	names, err := cron.OurJobNames(qctx, c.conn)
	if err != nil {
		cs.Problems = appendProblem(cs.Problems, "pgque.cron_job_names()", err, r)
		return
	}
	jobs, err := cron.ReadJobRuns(qctx, cronConn, names, r.Thresholds.CronWindow)
	if err != nil {
		cs.Problems = appendProblem(cs.Problems, "cron.job / cron.job_run_details", err, r)
		return
	}
	for _, j := range jobs {
		row := JobRow{JobRuns: j}
		row.Verdict = jobVerdict(&row, settings.LogRun, r.Session.Now, r.Thresholds)
		cs.Jobs = append(cs.Jobs, row)
	}
	if n, err := cron.CountRunning(qctx, cronConn); err != nil {
		cs.Problems = appendProblem(cs.Problems, "cron.job_run_details", err, r)
	} else {
		cs.Running = n
		cs.RunningVerdict = runningVerdict(n, settings.MaxRunningJobs, r.Thresholds)
	}
	cs.History = historyVerdict(access, r.Thresholds)
}

// cronConnection returns a connection to the cron database: the main one
// when it is the engine database, else a second one with the same
// credentials (kept for --watch).
func (c *Collector) cronConnection(ctx context.Context, cronDB, engineDB string) (*pgx.Conn, error) {
	if cronDB == engineDB {
		return c.conn, nil
	}
	if c.cronConn != nil && !c.cronConn.IsClosed() && c.cronDB == cronDB {
		return c.cronConn, nil
	}
	if c.cronConn != nil {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = c.cronConn.Close(cctx)
		cancel()
	}
	conn, err := db.ConnectToDatabase(ctx, c.conn, cronDB)
	if err != nil {
		return nil, err
	}
	c.cronConn, c.cronDB = conn, cronDB
	return conn, nil
}

func runningVerdict(n int64, maxJobs int, t Thresholds) Verdict {
	if maxJobs <= 0 {
		return ok("%d runs in progress", n)
	}
	share := float64(n) / float64(maxJobs)
	switch {
	case share >= 1:
		return crit("%d runs in progress = cron.max_running_jobs (%d): further runs wait; raise cron.max_running_jobs", n, maxJobs)
	case t.CronRunningWarn > 0 && share >= t.CronRunningWarn:
		return warn("%d of cron.max_running_jobs (%d) runs in progress", n, maxJobs)
	}
	return ok("%d of cron.max_running_jobs (%d) runs in progress", n, maxJobs)
}

func historyVerdict(a cron.Access, t Thresholds) Verdict {
	if t.CronRunDetailsWarn > 0 && a.RunDetailRows > t.CronRunDetailsWarn {
		return warn("cron.job_run_details holds %d rows (%s): pgque purges its own rows after the cron_run_retention setting; purge other jobs' history",
			a.RunDetailRows, bytesText(float64(a.RunDetailSize)))
	}
	return ok("cron.job_run_details: %d rows, %s", a.RunDetailRows, bytesText(float64(a.RunDetailSize)))
}

// judgeTicking decides what ticks this database's queues, judged by what
// happens (successful runs, the loop's liveness lock, tick lag of queues
// with events waiting), not by which jobs exist.
func (c *Collector) judgeTicking(r *Report) {
	cs := &r.Cron
	leader := grantedHolder(cs.Daemon)
	loop := grantedHolder(cs.Loop)
	var ticker *JobRow
	tickerJobs := 0
	for i := range cs.Jobs {
		if isTickerJob(cs.Jobs[i].JobRuns) {
			if ticker == nil {
				ticker = &cs.Jobs[i]
			}
			tickerJobs++
		}
	}
	needTicks := 0
	var stalled *QueueRow // the queue with events waiting longest for a tick, when WARN or worse
	for i, q := range r.Queues.Rows {
		if !q.ExternalTicker {
			needTicks++
		}
		lag := pgstats.LagOf(q.QueueInfo)
		if lag.NewEvents > 0 && !lag.Paused && q.Level != OK && lag.Lag != nil && *lag.Lag >= q.TickLagWarnAt &&
			(stalled == nil || *lag.Lag > *stalled.TickerLag) {
			stalled = &r.Queues.Rows[i]
		}
	}
	// The pg_cron loop is alive when it holds its liveness lock, or when
	// pg_cron reports the ticker job's run in progress.
	cronRunning := ticker != nil && ticker.RunningSince != nil
	cs.LoopAlive = loop != nil || cronRunning
	cronTicks := ticker != nil && ticker.Active && ticker.Level != Crit &&
		(cronRunning || ticker.LastFinishedStatus == "succeeded")
	loopText := "pg_cron loop alive"
	switch {
	case loop != nil:
		loopText += fmt.Sprintf(" (pid %d holds the loop lock)", loop.PID)
	case cronRunning:
		loopText += fmt.Sprintf(" (job %s running since %s ago)", ticker.Name, dur(r.Session.Now.Sub(*ticker.RunningSince).Seconds()))
	}
	cronHidden := cs.Settings.Loaded && cs.Access.Installed && cs.Access.SchemaUsage && !cs.Access.SeesAllJobs && len(cs.Jobs) == 0
	var v Verdict
	switch {
	case ticker != nil && ticker.Level == Crit:
		v = crit("the pg_cron ticker job %s does not tick: %s", ticker.Name, ticker.Reason)
	case leader != nil && loop != nil:
		v = ok("%s; ticker daemon pid %d stands by (%s)", loopText, leader.PID, daemonText(*leader))
	case leader != nil && cronTicks:
		v = warn("both pg_cron (job %s) and the ticker daemon (pid %d, %s) tick this database: double the ticks and WAL; stop one (pgquectl tick --off, or stop the daemon)",
			ticker.Name, leader.PID, daemonText(*leader))
	case cs.LoopAlive:
		v = ok("%s", loopText)
	case cronTicks:
		v = ok("pg_cron job %s (%s): %s", ticker.Name, ticker.Schedule, ticker.Reason)
	case leader != nil:
		v = ok("ticker daemon: pid %d (%s)", leader.PID, daemonText(*leader))
	case len(r.Queues.Problems) > 0 || !r.Engine.Installed || !r.Engine.SchemaUsage:
		v = unknown("cannot tell whether anything needs ticking: the queues are not readable")
	case len(r.Queues.Rows) == 0:
		v = ok("no queues: nothing to tick")
	case needTicks == 0:
		v = ok("every queue has an external ticker")
	case stalled == nil && cronHidden:
		// pg_cron hides other roles' jobs; the queues say whether ticks come.
		v = ok("queues tick on time (pg_cron shows %s none of its jobs: run status as the job owner to judge them too)", r.Session.User)
	case len(cs.Problems) > 0 && stalled == nil:
		v = ok("queues tick on time (the pg_cron section is unreadable)")
	case ticker != nil && !ticker.Active:
		v = warn("the pg_cron ticker job %s is inactive and no ticker daemon runs", ticker.Name)
	case ticker != nil:
		v = ok("pg_cron job %s (%s): %s", ticker.Name, ticker.Schedule, ticker.Reason)
	default:
		v = warn("nothing ticks the %d queue(s): no pg_cron ticker job and no ticker daemon; run pgquectl tick (pg_cron) or pgquectl tick --run", needTicks)
	}
	// The engine registers two ticker jobs (pgque.cron_jobs(): one runs the
	// loop while the other's run stands by to take over when it ends). One
	// alone is a job set from before that - it stays until pgquectl tick
	// is run again - and ticking pauses at each of its runs' ends.
	if ticker != nil && tickerJobs == 1 {
		v = worse(v, warn("only one pg_cron ticker job (%s, %s): this engine runs two taking turns, so ticking pauses when a run ends; the job set predates the engine: re-run pgquectl tick to register the current one (%s)",
			ticker.Name, ticker.Schedule, v.Reason))
	}
	if stalled != nil {
		cs.DownFor = stalled.TickerLag
		lvl := stalled.Level
		reason := fmt.Sprintf("ticking is down: queue %s has %s waiting and no tick for %s", stalled.Name, events(*stalled.NewEvents), dur(*stalled.TickerLag))
		if !cs.LoopAlive && leader == nil {
			reason += "; the pg_cron loop is not alive and no ticker daemon stands by"
		}
		v = worse(v, Verdict{Level: lvl, Reason: reason + " (" + v.Reason + ")"})
	}
	// One job's pause between its runs is a pause in ticking only when it
	// is the only ticker job: with two (pgque_ticker and pgque_ticker_2,
	// taking turns - alternate minutes on pg_cron 1.4) the other's run
	// ticks meanwhile; the pause between ticks below says what happened.
	if ticker != nil && tickerJobs == 1 && ticker.LargestGap != nil && *ticker.LargestGap >= 1 {
		cs.LargestGap, cs.LargestGapAt = ticker.LargestGap, ticker.LargestGapAt
		v.Reason += fmt.Sprintf("; longest pause between ticker runs in the last %s: %s (from %s)",
			dur(r.Thresholds.CronWindow.Seconds()), dur(*ticker.LargestGap), ticker.LargestGapAt.UTC().Format(time.RFC3339))
	}
	if g := cs.TickGap; g != nil && g.Gap >= 1 {
		v.Reason += fmt.Sprintf("; longest pause between ticks of a busy queue in the kept tick rows: %s (queue %s, from %s)",
			dur(g.Gap), g.Queue, g.From.UTC().Format(time.RFC3339))
	}
	cs.Ticking = v
}

// grantedHolder returns the session holding the lock, or nil.
func grantedHolder(hs []pgstats.AdvisoryHolder) *pgstats.AdvisoryHolder {
	for i := range hs {
		if hs[i].Granted {
			return &hs[i]
		}
	}
	return nil
}

func daemonText(h pgstats.AdvisoryHolder) string {
	s := "application " + fmt.Sprintf("%q", h.Application)
	if h.User != "" {
		s += ", user " + h.User
	}
	if h.BackendStart != nil {
		s += ", since " + h.BackendStart.UTC().Format(time.RFC3339)
	}
	return s
}

// appendProblem records err for what, naming the grant for a permission error.
func appendProblem(ps []Problem, what string, err error, r *Report) []Problem {
	p := Problem{What: what, Error: err.Error()}
	user := "<user>"
	if r.Session != nil {
		user = quoteIdent(r.Session.User)
	}
	switch {
	case errors.Is(err, pgstats.ErrPermission) && (what == "pgque.get_queue_info()" || what == "pgque.get_consumer_info()" || what == "the pgque engine"):
		p.Fix = "GRANT pgque_reader TO " + user
	case errors.Is(err, pgstats.ErrPermission):
		p.Fix = "GRANT pg_monitor TO " + user
	}
	return append(ps, p)
}

// quoteIdent quotes an identifier for advice text when it needs quoting.
func quoteIdent(s string) string {
	plain := s != ""
	for i, ch := range s {
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || (i > 0 && ch >= '0' && ch <= '9')) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return pgx.Identifier{s}.Sanitize()
}
