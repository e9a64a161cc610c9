package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgstats"
)

// Named statements of the measurement side.
const (
	// qDeadTuples counts dead tuples exactly (pgstattuple) in a table and, when
	// it is partitioned, in its children. Autovacuum's n_dead_tup is a
	// lagging estimate; these tables are small, so the exact count is cheap.
	qDeadTuples = `
SELECT coalesce(sum((pgstattuple(c.oid)).dead_tuple_count), 0)::bigint
  FROM pg_class c
 WHERE c.relkind = 'r'
   AND (c.oid = to_regclass($1)
        OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass($1)))`
	qCronRuns      = `SELECT count(*) FROM cron.job_run_details`
	qHoldXminBegin = `BEGIN ISOLATION LEVEL REPEATABLE READ`
	qHoldXminSnap  = `SELECT count(*) FROM pg_class` // takes the snapshot, held until ROLLBACK
	qBystander     = `SELECT v FROM bench_bystander WHERE id = $1`
	qCheckpoint    = `CHECKPOINT`
	// qVacuumAll cleans up after the previous phase (dropped queues, dead
	// catalog rows) so autovacuum's full-page images do not land in this
	// phase's WAL.
	qVacuumAll      = `VACUUM`
	qAnalyzeAll     = `ANALYZE`
	qListen         = `LISTEN ` // + quoted channel
	qBackendXminSet = `SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = pg_backend_pid()`
	// qWALStats breaks the phase's WAL down by record type (pg_walinspect).
	// qWALTotals: record bytes and full-page-image bytes of the span
	// (pg_walinspect): FPIs depend on when the last checkpoint was, the
	// record bytes do not.
	qWALTotals = `SELECT coalesce(sum(record_size), 0)::bigint, coalesce(sum(fpi_size), 0)::bigint
	                FROM pg_get_wal_stats($1::text::pg_lsn, $2::text::pg_lsn, false)`
	qCheckpointCount = `SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter`
	// qTickerRuns: the ticker job's pg_cron runs of this database that
	// overlap the span (start, end; end NULL while running).
	qTickerRuns = `SELECT d.start_time, d.end_time FROM cron.job_run_details d JOIN cron.job j USING (jobid)
	                WHERE j.database = $1 AND j.command LIKE $2 AND d.start_time IS NOT NULL
	                  AND d.start_time <= $4 AND coalesce(d.end_time, 'infinity') >= $3 ORDER BY d.start_time`
	// qSlot: the loop's slot and effective overrun (ticker_loop caps it at
	// half a slot).
	qSlot = `SELECT s, least(coalesce(pgque.get_setting('ticker_overrun_ms')::int8, 1500), s * 500)
	           FROM (SELECT coalesce(pgque.get_setting('ticker_slot_seconds')::int8, 60) AS s) x`
	// qWALByRelation: the span's WAL by record type and relation (what
	// writes when nothing happens, what 100 Hz adds: the short phases
	// without a held xmin), largest record bytes
	// without full-page images first. A relation of another database or a
	// shared catalog is named as such; '-' = no block (commits and the like).
	qWALByRelation = `SELECT w.resource_manager || '/' || w.record_type,
	       CASE WHEN m IS NULL THEN '-'
	            WHEN m[2] = '0' THEN 'shared catalog'
	            WHEN m[2]::oid <> (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()) THEN 'another database'
	            ELSE coalesce(pg_filenode_relation(CASE WHEN m[1]::oid = 1663 THEN 0 ELSE m[1]::oid END, m[3]::oid)::regclass::text,
	                          'relfilenode ' || m[3]) END AS rel,
	       count(*), sum(w.record_length - w.fpi_length)::bigint, sum(w.fpi_length)::bigint
	  FROM pg_get_wal_records_info($1::text::pg_lsn, $2::text::pg_lsn) w,
	       LATERAL (SELECT regexp_match(w.block_ref, 'rel (\d+)/(\d+)/(\d+)') AS m) x
	 GROUP BY 1, 2 ORDER BY 4 DESC LIMIT 20`
	qWALStats = `SELECT "resource_manager/record_type", count, record_size, fpi_size, combined_size
	               FROM pg_get_wal_stats($1::text::pg_lsn, $2::text::pg_lsn, true)
	              WHERE count > 0 ORDER BY combined_size DESC LIMIT 12`
)

// Latency summarizes a latency sample, in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	Min   float64 `json:"min_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

// CDFPoint is one point of a latency CDF.
type CDFPoint struct {
	Ms   float64 `json:"ms"`
	Frac float64 `json:"frac"`
}

// Sample is one periodic reading during a phase.
type Sample struct {
	T           float64 `json:"t_s"`       // seconds since the phase started
	WAL         int64   `json:"wal_bytes"` // since the phase started
	DeadTick    int64   `json:"dead_tick"`
	DeadSub     int64   `json:"dead_subscription"`
	DeadQueue   int64   `json:"dead_queue"`
	DeadEvent   int64   `json:"dead_event"`
	Backends    int64   `json:"backends"`
	NotifyUsage float64 `json:"notify_usage"`
	CronRuns    int64   `json:"cron_runs"`
	// Machine pressure (Linux PSI, /proc/pressure): the share of the
	// interval in which some task waited for a CPU / for I/O.
	CPUStall float64 `json:"cpu_pressure"`
	IOStall  float64 `json:"io_pressure"`
}

// psiTotal reads the "some ... total=<µs>" counter of /proc/pressure/<res>.
func psiTotal(res string) (int64, bool) {
	raw, err := os.ReadFile("/proc/pressure/" + res)
	if err != nil {
		return 0, false
	}
	for l := range strings.SplitSeq(string(raw), "\n") {
		if !strings.HasPrefix(l, "some ") {
			continue
		}
		if i := strings.Index(l, "total="); i >= 0 {
			var v int64
			if _, err := fmt.Sscanf(l[i:], "total=%d", &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}

// PhaseResult is what one phase measured.
type PhaseResult struct {
	Phase
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Produced int       `json:"produced"`
	Consumed int       `json:"consumed"`
	Dups     int       `json:"duplicates"`
	Missing  int       `json:"missing"`

	Latency Latency    `json:"latency"`
	CDF     []CDFPoint `json:"cdf"`
	// Ack: the consumer's acknowledgement after each receive that returned
	// events (ms from the receive returning to the ack returning): outside
	// the latency, which ends when the receive returns.
	Ack Latency `json:"ack"`

	WALBytes       int64   `json:"wal_bytes"`
	WALBytesPerSec float64 `json:"wal_bytes_per_sec"`
	WALSeconds     float64 `json:"wal_seconds"` // span of the WAL reading (phase + drain); the rates divide by Seconds
	// WAL split by pg_walinspect: record bytes (independent of checkpoint
	// timing) and full-page images (paid after each checkpoint).
	WALRecordBytesPerSec float64 `json:"wal_record_bytes_per_sec"`
	WALFPIBytesPerSec    float64 `json:"wal_fpi_bytes_per_sec"`
	// Checkpoints that ran during the phase (pg_stat_bgwriter); each phase
	// starts right after a CHECKPOINT.
	Checkpoints int64 `json:"checkpoints"`
	// ExtraConsumers: the consumers besides the first (Phase.Consumers > 1):
	// what each received by the end of the drain.
	ExtraConsumers []ConsumerCheck `json:"extra_consumers,omitempty"`
	// Stalls: tick gaps over 50 ms and what happened then.
	Stalls []Stall `json:"stalls,omitempty"`

	PeakDeadTick  int64 `json:"peak_dead_tick"`
	PeakDeadSub   int64 `json:"peak_dead_subscription"`
	PeakDeadQueue int64 `json:"peak_dead_queue"`
	PeakDeadEvent int64 `json:"peak_dead_event"`

	CronRunsStart   int64   `json:"cron_runs_start"`
	CronRunsEnd     int64   `json:"cron_runs_end"`
	BackendsPeak    int64   `json:"backends_peak"`
	NotifyUsagePeak float64 `json:"notify_usage_peak"`
	PeakCPUStall    float64 `json:"peak_cpu_pressure"`
	PeakIOStall     float64 `json:"peak_io_pressure"`

	Bystander Latency `json:"bystander"`

	Ticks            int     `json:"ticks"`
	MaxTickGapMs     float64 `json:"max_tick_gap_ms"`
	MaxHandoverGapMs float64 `json:"max_handover_gap_ms"`
	Handovers        int     `json:"handovers"`

	// WorstEvents are the events with the largest latency (when committed).
	WorstEvents []Gap `json:"worst_events,omitempty"`
	// Split divides each event's latency at the first tick of the queue
	// whose tick_time (the tick transaction's start, server clock - the
	// same machine's clock) is at or after the event's commit clock: the
	// wait for that tick, and the rest (the tick's own work and COMMIT, the
	// consumer's poll interval and its receive). Where the p50 goes.
	Split *LatencySplit `json:"latency_split,omitempty"`
	// LockWaits: server log lines of lock waits ≥ deadlock_timeout (100 ms
	// in the bench cluster, log_lock_waits on) during the phase.
	LockWaits      []string `json:"lock_waits,omitempty"`
	LockWaitsCount int      `json:"lock_waits_count"`
	// TopGaps are the largest gaps between consecutive ticks (when, how long).
	TopGaps []Gap `json:"top_tick_gaps,omitempty"`
	// WALBreakdown: the phase's WAL by record type (largest first).
	WALBreakdown []WALRecordStat `json:"wal_breakdown,omitempty"`
	// WALByRelation (short phases without a held xmin): by record type and relation, largest
	// record bytes without FPI first (Record is "type on relation").
	WALByRelation []WALRecordStat `json:"wal_by_relation,omitempty"`

	Samples []Sample `json:"samples"`
	Errors  []string `json:"errors,omitempty"`
}

// ConsumerCheck is what one extra consumer received.
type ConsumerCheck struct {
	Name     string `json:"name"`
	Received int    `json:"received"`
	Missing  int    `json:"missing"`
	Dups     int    `json:"duplicates"`
}

// Gap is one gap between consecutive ticks.
type Gap struct {
	At time.Time `json:"at"` // the tick that ended the gap
	Ms float64   `json:"ms"`
}

// WALRecordStat is one row of pg_get_wal_stats.
type WALRecordStat struct {
	Record   string `json:"record"`
	Count    int64  `json:"count"`
	Bytes    int64  `json:"record_bytes"`
	FPIBytes int64  `json:"fpi_bytes"`
	Total    int64  `json:"combined_bytes"`
}

// recorder collects commit and receive times by event id.
type recorder struct {
	mu       sync.Mutex
	commit   map[int64]time.Time
	received map[int64]time.Time
	dups     int
	errs     []string
	// ackMs: per receive that returned events, ms from the receive to the
	// acknowledgement returning (not part of the latency; shows what a
	// latency measured after the ack would add).
	ackMs []float64
}

func newRecorder() *recorder {
	return &recorder{commit: map[int64]time.Time{}, received: map[int64]time.Time{}}
}

func (r *recorder) committed(ids []int64, at time.Time) {
	r.mu.Lock()
	for _, id := range ids {
		r.commit[id] = at
	}
	r.mu.Unlock()
}

func (r *recorder) got(ids []int64, at time.Time) {
	r.mu.Lock()
	for _, id := range ids {
		if _, ok := r.received[id]; ok {
			r.dups++
			continue
		}
		r.received[id] = at
	}
	r.mu.Unlock()
}

func (r *recorder) ack(ms float64) {
	r.mu.Lock()
	r.ackMs = append(r.ackMs, ms)
	r.mu.Unlock()
}

func (r *recorder) counts() (produced, consumed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.commit), len(r.received)
}

func (r *recorder) errorf(format string, a ...any) {
	r.mu.Lock()
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf(format, a...))
	}
	r.mu.Unlock()
}

// latencies joins commits and receipts (ids produced before the phase, e.g.
// the warm-up event, are ignored).
func (r *recorder) latencies(start time.Time) (ms []float64, missing int, detail []string, worst []Gap) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, c := range r.commit {
		g, ok := r.received[id]
		if !ok {
			missing++
			if len(detail) < 10 {
				detail = append(detail, fmt.Sprintf("event %d committed at +%.3fs never received", id, c.Sub(start).Seconds()))
			}
			continue
		}
		l := float64(g.Sub(c).Microseconds()) / 1000
		ms = append(ms, l)
		worst = append(worst, Gap{At: c, Ms: l})
	}
	slices.SortFunc(worst, func(a, b Gap) int { return cmp.Compare(b.Ms, a.Ms) })
	return ms, missing, detail, worst[:min(10, len(worst))]
}

// LatencySplit is the latency of each event divided at the first tick
// at or after its commit (see PhaseResult.Split), in milliseconds.
type LatencySplit struct {
	Events         int     `json:"events"`
	WaitP50        float64 `json:"wait_for_tick_p50_ms"`
	WaitMean       float64 `json:"wait_for_tick_mean_ms"`
	AfterTickP50   float64 `json:"tick_to_receive_p50_ms"`
	AfterTickMean  float64 `json:"tick_to_receive_mean_ms"`
	AfterTickP99   float64 `json:"tick_to_receive_p99_ms"`
	TickIntervalMs float64 `json:"tick_interval_mean_ms"`
}

// split computes the LatencySplit of the received events against the
// queue's tick times (sorted).
func (r *recorder) split(ticks []time.Time) *LatencySplit {
	if len(ticks) < 2 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var wait, after []float64
	for id, c := range r.commit {
		g, ok := r.received[id]
		if !ok {
			continue
		}
		i, _ := slices.BinarySearchFunc(ticks, c, func(t, c time.Time) int { return t.Compare(c) })
		if i == len(ticks) || ticks[i].After(g) {
			continue // no tick between commit and receipt on record
		}
		wait = append(wait, float64(ticks[i].Sub(c).Microseconds())/1000)
		after = append(after, float64(g.Sub(ticks[i]).Microseconds())/1000)
	}
	if len(wait) == 0 {
		return nil
	}
	w, _ := summarize(wait)
	a, _ := summarize(after)
	return &LatencySplit{Events: len(wait), WaitP50: w.P50, WaitMean: w.Mean, AfterTickP50: a.P50, AfterTickMean: a.Mean, AfterTickP99: a.P99,
		TickIntervalMs: float64(ticks[len(ticks)-1].Sub(ticks[0]).Microseconds()) / 1000 / float64(len(ticks)-1)}
}

// missingFrom counts the events committed (recorded in main) that this
// extra consumer's recorder did not receive.
func (r *recorder) missingFrom(main *recorder) (missing int) {
	main.mu.Lock()
	defer main.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range main.commit {
		if _, ok := r.received[id]; !ok {
			missing++
		}
	}
	return missing
}

func summarize(ms []float64) (Latency, []CDFPoint) {
	if len(ms) == 0 {
		return Latency{}, nil
	}
	slices.Sort(ms)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ms)))) - 1
		return ms[min(max(i, 0), len(ms)-1)]
	}
	var sum float64
	for _, v := range ms {
		sum += v
	}
	l := Latency{Count: len(ms), Min: ms[0], P50: q(0.50), P95: q(0.95), P99: q(0.99), P999: q(0.999),
		Max: ms[len(ms)-1], Mean: sum / float64(len(ms))}
	const points = 300
	var cdf []CDFPoint
	step := max(1, len(ms)/points)
	for i := 0; i < len(ms); i += step {
		cdf = append(cdf, CDFPoint{Ms: ms[i], Frac: float64(i+1) / float64(len(ms))})
	}
	cdf = append(cdf, CDFPoint{Ms: ms[len(ms)-1], Frac: 1})
	return l, cdf
}

// env is what every phase needs from the run.
type env struct {
	cfg       Config
	serverLog string // the benchmark cluster's log file
	dsn       func(db string) string
	cronDB    string
	progress  func(phase string, elapsed time.Duration)
}

func (e *env) connect(ctx context.Context, db, app string) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(e.dsn(db))
	if err != nil {
		return nil, err
	}
	cc.RuntimeParams["application_name"] = app
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(cctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s as %s: %w", db, app, err)
	}
	return c, nil
}

// runPhase runs one phase against sys and measures it.
func runPhase(ctx context.Context, e *env, sys system, p Phase) (res PhaseResult, err error) {
	res.Phase = p
	conns := map[string]*pgx.Conn{}
	defer func() {
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	}()
	names := []string{"admin", "producer", "consumer", "monitor", "wal", "bystander", "xmin", "procmon"}
	for i := 1; i < p.Consumers; i++ {
		names = append(names, consumerName(i))
	}
	for _, name := range names {
		c, err := e.connect(ctx, sys.DB(), "bench-"+name)
		if err != nil {
			return res, err
		}
		conns[name] = c
	}
	cronMon, err := e.connect(ctx, e.cronDB, "bench-cron-monitor")
	if err != nil {
		return res, err
	}
	conns["cron"] = cronMon

	setupCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := sys.Prepare(setupCtx, conns["admin"], p); err != nil {
		return res, err
	}
	defer func() { _ = sys.Finish(context.Background()) }()
	if _, err := conns["admin"].Exec(setupCtx, qVacuumAll); err != nil {
		return res, fmt.Errorf("vacuum before the phase: %w", err)
	}
	if _, err := conns["admin"].Exec(setupCtx, qCheckpoint); err != nil {
		return res, fmt.Errorf("checkpoint before the phase: %w", err)
	}
	var queueID int64
	if p.Rate > 0 {
		if queueID, err = sys.QueueID(setupCtx, conns["admin"]); err != nil {
			return res, fmt.Errorf("reading the queue id: %w", err)
		}
		if err := warmup(ctx, e, sys, conns["producer"], conns["consumer"]); err != nil {
			return res, err
		}
	} else if err := settleIdle(ctx, conns["admin"]); err != nil {
		return res, err
	}
	if p.HeldXmin {
		x := conns["xmin"]
		var held bool
		if _, err := x.Exec(ctx, qHoldXminBegin); err != nil {
			return res, fmt.Errorf("holding xmin: %w", err)
		}
		if err := x.QueryRow(ctx, qHoldXminSnap).Scan(new(int64)); err != nil {
			return res, fmt.Errorf("holding xmin: %w", err)
		}
		if err := x.QueryRow(ctx, qBackendXminSet).Scan(&held); err != nil || !held {
			return res, fmt.Errorf("holding xmin: the REPEATABLE READ session shows no backend_xmin (%v)", err)
		}
	}

	rec := newRecorder()
	extra := make([]*recorder, p.Consumers)
	for i := 1; i < p.Consumers; i++ {
		extra[i] = newRecorder()
	}
	start := time.Now()
	res.Started = start
	w0, err := pgstats.ReadWAL(ctx, conns["wal"])
	if err != nil {
		return res, err
	}
	var cp0 int64
	_ = conns["wal"].QueryRow(ctx, qCheckpointCount).Scan(&cp0)
	if err := cronMon.QueryRow(ctx, qCronRuns).Scan(&res.CronRunsStart); err != nil {
		return res, fmt.Errorf("counting cron.job_run_details: %w", err)
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var wg sync.WaitGroup
	var samples []Sample
	var tickTimes []time.Time
	var bystander []float64
	var psi []psiPoint
	var procs []procPoint
	prodCtx, stopProd := context.WithTimeout(runCtx, p.Duration)
	defer stopProd()
	consCtx, stopCons := context.WithCancel(runCtx)
	defer stopCons()

	wg.Add(5)
	go func() { defer wg.Done(); psi = psiSampler(runCtx) }()
	go func() { defer wg.Done(); procs = procSampler(runCtx, conns["procmon"], sys, rec) }()
	go func() { defer wg.Done(); samples = sampler(runCtx, e, sys, conns["monitor"], cronMon, w0, start, rec) }()
	go func() {
		defer wg.Done()
		tickTimes = tickWatcher(runCtx, sys, conns["admin"], queueID, p.Rate > 0, rec)
	}()
	go func() { defer wg.Done(); bystander = bystanderLoop(runCtx, e, conns["bystander"]) }()
	consDone, prodDone := make(chan struct{}), make(chan struct{})
	if p.Rate > 0 {
		var cwg sync.WaitGroup
		for i := 1; i < p.Consumers; i++ {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				consumer(consCtx, e, sys, p, conns[consumerName(i)], extra[i], consumerName(i))
			}()
		}
		go func() {
			defer close(consDone)
			consumer(consCtx, e, sys, p, conns["consumer"], rec, benchConsumer)
			cwg.Wait()
		}()
		go func() { defer close(prodDone); producer(prodCtx, e, sys, p, conns["producer"], rec) }()
	} else {
		close(consDone)
		close(prodDone)
	}
	// Progress while the phase runs.
	for t := time.NewTicker(time.Second); ; {
		select {
		case <-t.C:
			e.progress(p.Name, time.Since(start))
			continue
		case <-prodCtx.Done():
		}
		t.Stop()
		break
	}
	phaseEnd := time.Now()
	<-prodDone // its last transaction may still be committing
	// Drain: give the consumer a few ticks to receive what was committed.
	drainUntil := time.Now().Add(3*time.Second + 3*p.Period())
	for time.Now().Before(drainUntil) && ctx.Err() == nil {
		produced, consumed := rec.counts()
		for i := 1; i < p.Consumers; i++ {
			_, got := extra[i].counts()
			consumed = min(consumed, got)
		}
		if consumed >= produced {
			break
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	stopCons()
	<-consDone
	w1, werr := pgstats.ReadWAL(context.WithoutCancel(ctx), conns["wal"])
	var cp1 int64
	_ = conns["wal"].QueryRow(context.WithoutCancel(ctx), qCheckpointCount).Scan(&cp1)
	res.Checkpoints = cp1 - cp0
	stopRun()
	wg.Wait()
	if p.HeldXmin {
		_, _ = conns["xmin"].Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	_ = cronMon.QueryRow(context.WithoutCancel(ctx), qCronRuns).Scan(&res.CronRunsEnd)

	res.Seconds = phaseEnd.Sub(start).Seconds()
	if werr == nil {
		// The WAL of the phase's work (its production, and the drain's
		// ticks and acks that deliver what it produced) per second of
		// production. Dividing by the reading's span instead counted the
		// drain's idle time as production time: about 1 s at 1 Hz (the
		// last events wait for the next tick) against ~0.1 s at 100 Hz, so
		// the 1 Hz rate came out ~2% low and the 100 Hz / 1 Hz ratio high.
		res.setWAL(pgstats.Rate(w0, w1))
	}
	ms, missing, missingDetail, worst := rec.latencies(start)
	res.WorstEvents = worst
	res.Latency, res.CDF = summarize(ms)
	rec.mu.Lock()
	res.Ack, _ = summarize(rec.ackMs)
	rec.mu.Unlock()
	res.Produced, res.Consumed = rec.counts()
	res.Missing, res.Dups = missing, rec.dups
	res.Bystander, _ = summarize(bystander)
	res.Samples = samples
	for _, s := range samples {
		res.PeakDeadTick = max(res.PeakDeadTick, s.DeadTick)
		res.PeakDeadSub = max(res.PeakDeadSub, s.DeadSub)
		res.PeakDeadQueue = max(res.PeakDeadQueue, s.DeadQueue)
		res.PeakDeadEvent = max(res.PeakDeadEvent, s.DeadEvent)
		res.BackendsPeak = max(res.BackendsPeak, s.Backends)
		res.NotifyUsagePeak = max(res.NotifyUsagePeak, s.NotifyUsage)
		res.PeakCPUStall = max(res.PeakCPUStall, s.CPUStall)
		res.PeakIOStall = max(res.PeakIOStall, s.IOStall)
	}
	res.Ticks = len(tickTimes)
	res.Split = rec.split(tickTimes)
	runs := tickerRuns(context.WithoutCancel(ctx), cronMon, sys, start, phaseEnd, rec)
	marks := slotEnds(context.WithoutCancel(ctx), sys, conns["admin"], start, phaseEnd, rec)
	for _, m := range marks {
		runs = append(runs, span{from: m, to: m})
	}
	res.MaxTickGapMs, res.MaxHandoverGapMs, res.Handovers = tickGaps(tickTimes, start, phaseEnd, runs)
	if len(marks) > 0 {
		res.Handovers = len(marks)
	}
	res.TopGaps = topGaps(tickTimes, start, phaseEnd, 10)
	res.Stalls = stalls(tickTimes, start, phaseEnd, psi, procs, e.serverLog, runs)
	if werr == nil {
		res.WALBreakdown = walBreakdown(context.WithoutCancel(ctx), conns["wal"], w0, w1, rec)
		// By relation only for the short phases that measure WAL (no xmin
		// held): reading a 10-minute phase's WAL record by record took
		// longer than the 30 s budget and overlapped the next phase.
		if !p.HeldXmin && p.Duration <= 2*time.Minute {
			res.WALByRelation = walByRelation(context.WithoutCancel(ctx), conns["wal"], w0, w1, rec)
		}
		var recBytes, fpiBytes int64
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if err := conns["wal"].QueryRow(qctx, qWALTotals, w0.LSN.String(), w1.LSN.String()).Scan(&recBytes, &fpiBytes); err != nil {
			rec.errorf("wal totals: %v", err)
		} else if res.Seconds > 0 {
			res.WALRecordBytesPerSec = float64(recBytes) / res.Seconds
			res.WALFPIBytesPerSec = float64(fpiBytes) / res.Seconds
		}
		cancel()
	}
	for i := 1; i < p.Consumers; i++ {
		missing := extra[i].missingFrom(rec)
		_, got := extra[i].counts()
		res.ExtraConsumers = append(res.ExtraConsumers, ConsumerCheck{Name: consumerName(i), Received: got, Missing: missing, Dups: extra[i].dups})
		if missing > 0 || extra[i].dups > 0 {
			rec.errorf("consumer %s: %d events not received, %d twice", consumerName(i), missing, extra[i].dups)
		}
	}
	res.Errors = append(slices.Clone(rec.errs), missingDetail...)
	if e.serverLog != "" {
		res.LockWaits, res.LockWaitsCount = lockWaits(e.serverLog, start, phaseEnd)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// tickGaps returns the largest gap between consecutive ticks within the
// measured span, and the largest gap during which a pg_cron run of the
// ticker started or ended (a slot handover: each minute on pg_cron 1.4,
// each second on 1.5+), with the number of run starts in the span.
func tickGaps(ts []time.Time, from, to time.Time, runs []span) (maxGap, maxHandover float64, handovers int) {
	for i := 1; i < len(ts); i++ {
		a, b := ts[i-1], ts[i]
		if a.Before(from) || b.After(to) {
			continue
		}
		gap := float64(b.Sub(a).Microseconds()) / 1000
		maxGap = max(maxGap, gap)
		if inAny(runs, a, b) {
			maxHandover = max(maxHandover, gap)
		}
	}
	for _, r := range runs {
		if r.from.After(from) && r.from.Before(to) {
			handovers++
		}
	}
	return maxGap, maxHandover, handovers
}

// slotEnds lists our engine's ticker_loop() handover instants within the
// span: each slot end (epoch-aligned ticker_slot_seconds plus the overrun,
// capped at half a slot, as the loop computes it). On pg_cron >= 1.5 the run
// that hands over lingers 2 s before it ends, so the handover is no pg_cron
// run start or end; nil for the other systems.
func slotEnds(ctx context.Context, sys system, conn *pgx.Conn, from, to time.Time, rec *recorder) []time.Time {
	if sys.Name() != SystemPgque {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var slot, overrun int64
	if err := conn.QueryRow(ctx, qSlot).Scan(&slot, &overrun); err != nil {
		rec.errorf("ticker slot settings: %v", err)
		return nil
	}
	if slot <= 0 {
		return nil
	}
	var out []time.Time
	for t := from.Unix()/slot*slot - slot; t <= to.Unix(); t += slot {
		m := time.Unix(t, 0).Add(time.Duration(overrun) * time.Millisecond)
		if m.After(from) && m.Before(to) {
			out = append(out, m)
		}
	}
	return out
}

// tickerRuns reads the pg_cron runs of sys's ticker job overlapping the span.
func tickerRuns(ctx context.Context, cronMon *pgx.Conn, sys system, from, to time.Time, rec *recorder) []span {
	like := sys.TickerJobLike()
	if like == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := cronMon.Query(ctx, qTickerRuns, sys.DB(), like, from, to)
	if err != nil {
		rec.errorf("ticker runs: %v", err)
		return nil
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (span, error) {
		var s span
		var end *time.Time
		err := r.Scan(&s.from, &end)
		if end != nil {
			s.to = *end
		}
		return s, err
	})
	if err != nil {
		rec.errorf("ticker runs: %v", err)
	}
	return out
}

// topGaps returns the n largest gaps between consecutive ticks in the span.
func topGaps(ts []time.Time, from, to time.Time, n int) []Gap {
	var gaps []Gap
	for i := 1; i < len(ts); i++ {
		if ts[i-1].Before(from) || ts[i].After(to) {
			continue
		}
		gaps = append(gaps, Gap{At: ts[i], Ms: float64(ts[i].Sub(ts[i-1]).Microseconds()) / 1000})
	}
	slices.SortFunc(gaps, func(a, b Gap) int { return cmp.Compare(b.Ms, a.Ms) })
	return gaps[:min(n, len(gaps))]
}

// walBreakdown reads pg_get_wal_stats between two WAL points.
func walBreakdown(ctx context.Context, c *pgx.Conn, w0, w1 pgstats.WALPoint, rec *recorder) []WALRecordStat {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := c.Query(ctx, qWALStats, w0.LSN.String(), w1.LSN.String())
	if err != nil {
		rec.errorf("wal breakdown: %v", err)
		return nil
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WALRecordStat, error) {
		var s WALRecordStat
		return s, r.Scan(&s.Record, &s.Count, &s.Bytes, &s.FPIBytes, &s.Total)
	})
	if err != nil {
		rec.errorf("wal breakdown: %v", err)
	}
	return out
}

// walByRelation reads the WAL between two points by record type and
// relation (qWALByRelation).
func walByRelation(ctx context.Context, c *pgx.Conn, w0, w1 pgstats.WALPoint, rec *recorder) []WALRecordStat {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := c.Query(ctx, qWALByRelation, w0.LSN.String(), w1.LSN.String())
	if err != nil {
		rec.errorf("wal by relation: %v", err)
		return nil
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WALRecordStat, error) {
		var s WALRecordStat
		var typ, rel string
		err := r.Scan(&typ, &rel, &s.Count, &s.Bytes, &s.FPIBytes)
		s.Record, s.Total = typ+" on "+rel, s.Bytes+s.FPIBytes
		return s, err
	})
	if err != nil {
		rec.errorf("wal by relation: %v", err)
	}
	return out
}

// lockWaits returns the server log's lock-wait lines ("still waiting for",
// "acquired ... after") logged between from and to.
func lockWaits(path string, from, to time.Time) ([]string, int) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, 0
	}
	var out []string
	n := 0
	lines := strings.Split(string(raw), "\n")
	for i, l := range lines {
		if !strings.Contains(l, "still waiting for") || len(l) < 27 {
			continue
		}
		at, err := time.Parse("2006-01-02 15:04:05.000 MST", l[:27])
		if err != nil || at.Before(from) || at.After(to) {
			continue
		}
		n++
		if len(out) < 8 {
			// The DETAIL (holder, wait queue) and STATEMENT lines follow.
			for _, next := range lines[i+1 : min(i+4, len(lines))] {
				if strings.Contains(next, "DETAIL:") || strings.Contains(next, "STATEMENT:") || strings.Contains(next, "CONTEXT:") {
					l += " | " + strings.TrimSpace(next[min(len(next), 27):])
				}
			}
			out = append(out, l)
		}
	}
	return out, n
}

// idleSettle is how long an idle phase lets the cluster settle before it
// measures (settleIdle).
const idleSettle = 5 * time.Second

// settleIdle makes an idle phase measure what idle ticking writes, not what
// creating its queues left behind: it lets the ticker make the new queues'
// first ticks (2 s), then ANALYZEs everything (creating 100 queues changes
// thousands of catalog rows: autovacuum would otherwise analyze the
// catalogs - pg_statistic updates, ~0.9 KiB/s - during the measurement)
// and VACUUMs (the pg_statistic rows ANALYZE replaced), CHECKPOINTs, and waits idleSettle more so that the first modification of
// each page after the checkpoint (full-page images) falls before the
// measurement, as far as the pages written in that time go.
func settleIdle(ctx context.Context, admin *pgx.Conn) error {
	if !sleepCtx(ctx, 2*time.Second) {
		return ctx.Err()
	}
	if _, err := admin.Exec(ctx, qAnalyzeAll); err != nil {
		return fmt.Errorf("analyze before the idle phase: %w", err)
	}
	// ANALYZE replaced pg_statistic rows: vacuum them now, not autovacuum
	// during the measurement.
	if _, err := admin.Exec(ctx, qVacuumAll); err != nil {
		return fmt.Errorf("vacuum before the idle phase: %w", err)
	}
	if _, err := admin.Exec(ctx, qCheckpoint); err != nil {
		return fmt.Errorf("checkpoint before the idle phase: %w", err)
	}
	if !sleepCtx(ctx, idleSettle) {
		return ctx.Err()
	}
	return nil
}

// warmup sends one event and waits until the consumer sees it: ticking is live.
func warmup(ctx context.Context, e *env, sys system, prod, cons *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.WarmupTimeout)
	defer cancel()
	ids, err := sys.Produce(ctx, prod, 1)
	if err != nil {
		return fmt.Errorf("warm-up event: %w", err)
	}
	for {
		got, _, _, err := sys.Consume(ctx, cons, benchConsumer)
		if err != nil {
			return fmt.Errorf("warm-up receive: %w", err)
		}
		if slices.Contains(got, ids[0]) {
			return nil
		}
		if !sleepCtx(ctx, 10*time.Millisecond) {
			return fmt.Errorf("warm-up: no tick within %s: is the ticker running? (%w)", e.cfg.WarmupTimeout, ctx.Err())
		}
	}
}

// producer commits events at p.Rate per second, batched into at most
// ProducerTxPerSec transactions per second, on a fixed schedule; or, with
// ArrivalsPoisson, one event per transaction at exponentially distributed
// gaps of mean 1/Rate (a Poisson process: bursts and lulls as real traffic).
func producer(ctx context.Context, e *env, sys system, p Phase, conn *pgx.Conn, rec *recorder) {
	if p.Arrivals == ArrivalsPoisson {
		next := time.Now()
		for {
			next = next.Add(time.Duration(rand.ExpFloat64() / float64(p.Rate) * float64(time.Second)))
			if !sleepCtx(ctx, time.Until(next)) {
				return
			}
			qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			ids, err := sys.Produce(qctx, conn, 1)
			cancel()
			if err != nil {
				rec.errorf("produce: %v", err)
				continue
			}
			rec.committed(ids, time.Now())
		}
	}
	txps := min(e.cfg.ProducerTxPerSec, p.Rate)
	per := p.Rate / txps
	extra := p.Rate % txps // spread the remainder over the second
	interval := time.Second / time.Duration(txps)
	next := time.Now()
	for i := 0; ; i++ {
		if !sleepCtx(ctx, time.Until(next)) {
			return
		}
		n := per
		if i%txps < extra {
			n++
		}
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		ids, err := sys.Produce(qctx, conn, n)
		cancel()
		at := time.Now()
		if err != nil {
			rec.errorf("produce: %v", err)
		} else {
			rec.committed(ids, at)
		}
		next = next.Add(interval)
	}
}

// consumer receives and acknowledges: poll-only every PollInterval, or
// LISTEN + a slow poll.
func consumer(ctx context.Context, e *env, sys system, p Phase, conn *pgx.Conn, rec *recorder, name string) {
	listen := p.Wake == WakeListen && sys.Channel() != ""
	if listen {
		if _, err := conn.Exec(ctx, qListen+pgx.Identifier{sys.Channel()}.Sanitize()); err != nil {
			rec.errorf("listen: %v", err)
			listen = false
		}
	}
	for ctx.Err() == nil {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		ids, at, more, err := sys.Consume(qctx, conn, name)
		cancel()
		if len(ids) > 0 && err == nil {
			rec.ack(float64(time.Since(at).Microseconds()) / 1000)
		}
		if err != nil {
			rec.errorf("consume: %v", err)
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		if len(ids) > 0 {
			rec.got(ids, at)
		}
		if more {
			continue // a batch was there: the next may be ready right away
		}
		if listen {
			wctx, cancel := context.WithTimeout(ctx, e.cfg.ListenFallback)
			_, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				rec.errorf("wait for notification: %v", err)
			}
			continue
		}
		sleepCtx(ctx, e.cfg.PollInterval)
	}
}

// sampler reads WAL, dead tuples, backends, the notify queue and
// cron.job_run_details every SampleEvery.
func sampler(ctx context.Context, e *env, sys system, mon, cronMon *pgx.Conn, w0 pgstats.WALPoint, start time.Time, rec *recorder) []Sample {
	var out []Sample
	tick, sub, queue := sys.MetaTables()
	t := time.NewTicker(e.cfg.SampleEvery)
	defer t.Stop()
	lastAt := time.Now()
	lastCPU, _ := psiTotal("cpu")
	lastIO, _ := psiTotal("io")
	take := func() {
		now := time.Now()
		us := float64(now.Sub(lastAt).Microseconds())
		cpu, ok1 := psiTotal("cpu")
		io, ok2 := psiTotal("io")
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		s := Sample{T: time.Since(start).Seconds()}
		if ok1 && ok2 && us > 0 {
			s.CPUStall, s.IOStall = float64(cpu-lastCPU)/us, float64(io-lastIO)/us
		}
		lastAt, lastCPU, lastIO = now, cpu, io
		if w, err := pgstats.ReadWAL(qctx, mon); err == nil {
			s.WAL = int64(w.LSN) - int64(w0.LSN)
		} else {
			rec.errorf("sample wal: %v", err)
		}
		for _, d := range []struct {
			rel string
			dst *int64
		}{{tick, &s.DeadTick}, {sub, &s.DeadSub}, {queue, &s.DeadQueue}} {
			if err := mon.QueryRow(qctx, qDeadTuples, d.rel).Scan(d.dst); err != nil {
				rec.errorf("sample dead tuples %s: %v", d.rel, err)
			}
		}
		if dead, err := pgstats.DeadTuples(qctx, mon, sys.EventSchema()); err == nil {
			for name, n := range dead {
				if strings.HasPrefix(name, "event_") {
					s.DeadEvent += n
				}
			}
		}
		if c, err := pgstats.ReadConnections(qctx, mon); err == nil {
			s.Backends = c.Total
		}
		if u, err := pgstats.NotifyQueueUsage(qctx, mon); err == nil {
			s.NotifyUsage = u
		}
		_ = cronMon.QueryRow(qctx, qCronRuns).Scan(&s.CronRuns)
		out = append(out, s)
	}
	for {
		select {
		case <-ctx.Done():
			take()
			return out
		case <-t.C:
			take()
		}
	}
}

// tickWatcher collects the tick times of the active queue.
func tickWatcher(ctx context.Context, sys system, conn *pgx.Conn, queueID int64, active bool, rec *recorder) []time.Time {
	if !active {
		<-ctx.Done()
		return nil
	}
	var out []time.Time
	var last int64
	read := func() {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		rows, err := conn.Query(qctx, sys.TickQuery(), queueID, last)
		if err != nil {
			rec.errorf("ticks: %v", err)
			return
		}
		var id int64
		var at time.Time
		_, err = pgx.ForEachRow(rows, []any{&id, &at}, func() error {
			out = append(out, at)
			last = id
			return nil
		})
		if err != nil {
			rec.errorf("ticks: %v", err)
		}
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			read()
			return out
		case <-t.C:
			read()
		}
	}
}

// bystanderLoop times a point query on an unrelated table.
func bystanderLoop(ctx context.Context, e *env, conn *pgx.Conn) []float64 {
	var out []float64
	t := time.NewTicker(e.cfg.BystanderEvery)
	defer t.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t0 := time.Now()
		var v string
		err := conn.QueryRow(qctx, qBystander, i%10000+1).Scan(&v)
		cancel()
		if err == nil {
			out = append(out, float64(time.Since(t0).Microseconds())/1000)
		}
	}
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

// setWAL records the WAL read over the phase and its drain; the rate is per
// second of production (res.Seconds must be set).
func (res *PhaseResult) setWAL(rate pgstats.WALRate) {
	res.WALBytes = rate.Bytes
	res.WALSeconds = rate.Seconds
	if res.Seconds > 0 {
		res.WALBytesPerSec = float64(rate.Bytes) / res.Seconds
	}
}
