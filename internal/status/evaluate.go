package status

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgstats"

	"github.com/pgquectl/pgquectl/internal/cron"

	"github.com/pgquectl/pgquectl/internal/db"
)

// This file holds the judgements: pure functions from measurements and
// thresholds to verdicts, so each rule reads in one place.

// dur formats seconds for reasons and tables: "850ms", "12.3s", "5m2s".
func dur(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return trimZeroUnits(d.Round(time.Second).String())
	}
	return trimZeroUnits(d.Round(time.Minute).String())
}

// trimZeroUnits shortens "2h0m0s" to "2h" and "10m0s" to "10m".
func trimZeroUnits(s string) string {
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// queueVerdict judges tick lag, pause and event-table rotation of a queue.
func queueVerdict(row *QueueRow, t Thresholds) Verdict {
	lag := pgstats.LagOf(row.QueueInfo)
	if row.NoClassicConsumer {
		// A tick period applies only while a classic consumer reads the
		// queue; otherwise the engine ticks it by the classic thresholds
		// (at ticker_max_count new events or ticker_max_lag).
		lag.ExpectedEvery = math.Max(lag.ExpectedEvery, row.TickerMaxLag)
	}
	row.ExpectedTickEvery = lag.ExpectedEvery
	row.TickLagWarnAt = math.Max(t.TickLagWarnFactor*lag.ExpectedEvery, t.TickLagWarnMin.Seconds())
	row.TickLagCritAt = math.Max(t.TickLagCritFactor*lag.ExpectedEvery, t.TickLagCritMin.Seconds())

	v := ok("ticking")
	switch {
	case lag.Paused:
		v = warn("ticker paused (SELECT pgque.set_queue_config(%s, 'ticker_paused', 'false') resumes it)", quoteLiteral(row.Name))
	case lag.NewEvents > 0 && lag.Lag == nil:
		v = warn("%s waiting for a tick and the queue never ticked: is a ticker running? (pgquectl tick)", events(lag.NewEvents))
	case lag.NewEvents > 0 && t.TickLagCritFactor > 0 && *lag.Lag >= row.TickLagCritAt:
		v = crit("%s waiting for a tick, none for %s (expected every %s, CRIT from %s): ticking has stopped; check the cron section or run pgquectl tick",
			events(lag.NewEvents), dur(*lag.Lag), dur(lag.ExpectedEvery), dur(row.TickLagCritAt))
	case lag.NewEvents > 0 && t.TickLagWarnFactor > 0 && *lag.Lag >= row.TickLagWarnAt:
		v = warn("%s waiting for a tick, none for %s (expected every %s, WARN from %s)",
			events(lag.NewEvents), dur(*lag.Lag), dur(lag.ExpectedEvery), dur(row.TickLagWarnAt))
	case lag.NewEvents == 0 && lag.Lag != nil && t.IdleTickFactor > 0 && lag.IdlePeriod > 0 &&
		*lag.Lag >= t.IdleTickFactor*lag.IdlePeriod:
		v = warn("idle queue has not ticked for %s (idle period %s): is a ticker running?", dur(*lag.Lag), dur(lag.IdlePeriod))
	case lag.Lag != nil:
		v = ok("last tick %s ago", dur(*lag.Lag))
	}
	if row.SinceRotation != nil && t.RotationOverdueFactor > 0 && row.RotationPeriod > 0 &&
		*row.SinceRotation >= t.RotationOverdueFactor*row.RotationPeriod {
		why := "no consumer holds it back: is maintenance running?"
		if row.PinnedBy != "" {
			why = "consumer " + row.PinnedBy + " pins it"
			if row.PinnedByLag != nil {
				why += " (lag " + dur(*row.PinnedByLag) + ")"
			}
		}
		v = worse(v, warn("event tables last rotated %s ago (period %s): %s", dur(*row.SinceRotation), dur(row.RotationPeriod), why))
	}
	return v
}

// consumerVerdict judges a consumer's lag while it has events to read.
func consumerVerdict(c pgstats.ConsumerInfo, t Thresholds) Verdict {
	pending := int64(0)
	if c.PendingEvents != nil {
		pending = *c.PendingEvents
	}
	if pending == 0 || c.Lag == nil {
		return ok("up to date")
	}
	lag := *c.Lag
	switch {
	case t.ConsumerLagCrit > 0 && lag >= t.ConsumerLagCrit.Seconds():
		return crit("%s to read, lag %s (CRIT from %s): is the consumer running? Start it or add workers; if it is gone for good, SELECT pgque.unsubscribe(%s, %s) stops keeping events for it",
			events(pending), dur(lag), dur(t.ConsumerLagCrit.Seconds()), quoteLiteral(c.Queue), quoteLiteral(c.Consumer))
	case t.ConsumerLagWarn > 0 && lag >= t.ConsumerLagWarn.Seconds():
		return warn("%s to read, lag %s (WARN from %s): is the consumer running? (if it is gone for good: SELECT pgque.unsubscribe(%s, %s))",
			events(pending), dur(lag), dur(t.ConsumerLagWarn.Seconds()), quoteLiteral(c.Queue), quoteLiteral(c.Consumer))
	}
	return ok("%s to read, lag %s", events(pending), dur(lag))
}

// familyBound returns the WARN bound of a table family (-1: no check).
func familyBound(k pgstats.TableKind, t Thresholds) int64 {
	switch k {
	case pgstats.KindEvent:
		return t.EventDeadMax
	case pgstats.KindTick:
		return t.TickDeadMax
	case pgstats.KindSubscription:
		return t.SubscriptionDeadMax
	case pgstats.KindCursor:
		return t.CursorDeadMax
	}
	return -1
}

// families sums the tables per family and judges dead tuples against the bounds.
func families(tables []pgstats.TableStat, t Thresholds) []FamilyRow {
	var out []FamilyRow
	for _, k := range pgstats.SumByKind(tables) {
		bound := familyBound(k.Kind, t)
		if bound < 0 || k.Tables == 0 {
			continue
		}
		f := FamilyRow{KindTotals: k, Bound: bound, CritAt: int64(math.Ceil(float64(bound) * t.DeadCritFactor))}
		if f.CritAt <= bound {
			f.CritAt = 0 // no CRIT level
		}
		for _, tb := range tables {
			if tb.Kind == k.Kind && (f.WorstName == "" || tb.DeadTuples > f.WorstDead) {
				f.WorstName, f.WorstDead = tb.Name, tb.DeadTuples
			}
		}
		why := ""
		switch k.Kind {
		case pgstats.KindEvent:
			why = "event tables are insert-only: dead rows come from rolled-back sends or foreign UPDATE/DELETE, and go at the next rotation"
		default:
			why = "rotation should keep them bounded even under a held xmin: check the xmin section and that maintenance/rotation runs"
		}
		switch {
		case f.CritAt > 0 && k.DeadTuples >= f.CritAt:
			f.Verdict = crit("%d dead tuples (bound %d, CRIT from %d), most in %s (%d): %s", k.DeadTuples, bound, f.CritAt, f.WorstName, f.WorstDead, why)
		case k.DeadTuples > bound:
			f.Verdict = warn("%d dead tuples (bound %d), most in %s (%d): %s", k.DeadTuples, bound, f.WorstName, f.WorstDead, why)
		default:
			f.Verdict = ok("%d dead tuples (bound %d)", k.DeadTuples, bound)
		}
		out = append(out, f)
	}
	return out
}

// walVerdict judges the WAL rate against the optional thresholds.
func walVerdict(w WALSection, t Thresholds) Verdict {
	if !w.Sampled || w.Rate == nil {
		return ok("not sampled (--sample 0)")
	}
	r := w.Rate.BytesPerSec
	switch {
	case t.WALCrit > 0 && r >= t.WALCrit:
		return crit("%s/s (CRIT from %s/s)", bytesText(r), bytesText(t.WALCrit))
	case t.WALWarn > 0 && r >= t.WALWarn:
		return warn("%s/s (WARN from %s/s)", bytesText(r), bytesText(t.WALWarn))
	}
	return ok("%s/s over %s", bytesText(r), dur(w.Rate.Seconds))
}

// holderName describes a session for reasons.
func holderName(b pgstats.Backend) string {
	s := fmt.Sprintf("pid %d", b.PID)
	var parts []string
	if b.User != "" {
		parts = append(parts, "user "+b.User)
	}
	if b.Application != "" {
		parts = append(parts, "application "+strconv.Quote(b.Application))
	}
	if b.State != "" {
		parts = append(parts, "state "+b.State)
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

func ageVerdict(who string, age float64, t Thresholds, fix string) Verdict {
	switch {
	case t.XminCrit > 0 && age >= t.XminCrit.Seconds():
		return crit("%s has held the xmin horizon for %s (CRIT from %s): dead tuples cannot be cleaned up meanwhile; %s",
			who, dur(age), dur(t.XminCrit.Seconds()), fix)
	case t.XminWarn > 0 && age >= t.XminWarn.Seconds():
		return warn("%s has held the xmin horizon for %s (WARN from %s); %s", who, dur(age), dur(t.XminWarn.Seconds()), fix)
	}
	return ok("%s holds the xmin horizon for %s", who, dur(age))
}

// backendVerdict judges one session holding backend_xmin / backend_xid.
func backendVerdict(b pgstats.Backend, user string, t Thresholds) Verdict {
	affects := b.SameDatabase || b.Database == ""
	switch {
	case !affects:
		return ok("in database %s: does not hold back this database's tables", b.Database)
	case b.Hidden:
		return unknown("%s holds the xmin horizon (%d xids old) but its age is hidden from %s: GRANT pg_monitor TO %s",
			holderName(b), b.XminAgeXIDs, user, user)
	case b.ExemptFromXmin:
		return ok("autovacuum worker: other vacuums ignore its xmin")
	case b.XactAge == nil:
		return ok("%s (%s) holds the horizon %d xids back; its age in time is unknown (standby feedback?)", holderName(b), b.BackendType, b.XminAgeXIDs)
	}
	return ageVerdict(holderName(b), *b.XactAge, t,
		fmt.Sprintf("end the transaction (the client must COMMIT/ROLLBACK) or SELECT pg_terminate_backend(%d)", b.PID))
}

// preparedVerdict judges a prepared transaction.
func preparedVerdict(p pgstats.PreparedXact, t Thresholds) Verdict {
	if !p.SameDatabase {
		return ok("in database %s: does not hold back this database's tables", p.Database)
	}
	return ageVerdict(fmt.Sprintf("prepared transaction %q (owner %s)", p.GID, p.Owner), p.Age, t,
		fmt.Sprintf("COMMIT PREPARED %s or ROLLBACK PREPARED %s", quoteLiteral(p.GID), quoteLiteral(p.GID)))
}

// slotVerdict judges a replication slot. Its age in time is unknown, so
// only an inactive slot that holds xmin is flagged.
func slotVerdict(s pgstats.Slot) Verdict {
	switch {
	case s.Xmin != nil && !s.Active:
		return warn("inactive %s slot %q holds xmin %s (%d xids old) for every database: drop it (SELECT pg_drop_replication_slot(%s)) or reconnect its client",
			s.Type, s.Name, *s.Xmin, db.Deref(s.XminAgeXIDs), quoteLiteral(s.Name))
	case s.Xmin != nil:
		return ok("active %s slot %q holds xmin %d xids back (standby feedback)", s.Type, s.Name, db.Deref(s.XminAgeXIDs))
	}
	return ok("%s slot %q holds only catalog_xmin: pgque tables are not affected", s.Type, s.Name)
}

// scheduleInterval returns how often a pg_cron schedule fires, in seconds,
// or false when the schedule is not one of the simple forms.
func scheduleInterval(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) == 2 && (f[1] == "seconds" || f[1] == "second") {
		n, err := strconv.Atoi(f[0])
		return float64(n), err == nil && n > 0
	}
	if len(f) != 5 || f[1] != "*" || f[2] != "*" || f[3] != "*" || f[4] != "*" {
		return 0, false
	}
	if f[0] == "*" {
		return 60, true
	}
	if n, err := strconv.Atoi(f[0]); err == nil && n >= 0 && n < 60 {
		return 3600, true // 'M * * * *': hourly
	}
	if k, found := strings.CutPrefix(f[0], "*/"); found {
		n, err := strconv.Atoi(k)
		return float64(n) * 60, err == nil && n > 0
	}
	// 'A-B/N * * * *' (pgque's second pg_cron 1.4 ticker job, '1-59/2'):
	// every N minutes when the range leaves at most N minutes uncovered
	// around the hour; otherwise the gap across the hour is longer.
	if rng, step, found := strings.Cut(f[0], "/"); found {
		lo, hi, isRange := strings.Cut(rng, "-")
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		n, errN := strconv.Atoi(step)
		if isRange && errA == nil && errB == nil && errN == nil && n > 0 && a >= 0 && a <= b && b < 60 {
			last := a + (b-a)/n*n // the last minute of the hour it fires at
			if a+60-last <= n {
				return float64(n) * 60, true
			}
		}
	}
	return 0, false
}

// isTickerJob says whether a job drives ticks.
func isTickerJob(j cron.JobRuns) bool { return strings.Contains(j.Command, "ticker") }

// jobVerdict judges one of our pg_cron jobs at server time now, by what its
// runs achieved: a job whose newest finished run failed is CRIT whether or
// not that run ever started (pg_cron records "connection failed" runs with
// no start time); staleness is measured from the newest successful run (or
// the run in progress), so failing runs do not count as a job that runs.
func jobVerdict(j *JobRow, logRun bool, now time.Time, t Thresholds) Verdict {
	if iv, known := scheduleInterval(j.Schedule); known {
		j.Interval = &iv
	}
	var lastGood *time.Time // the newest successful start, or the run in progress
	switch {
	case j.RunningSince != nil:
		lastGood = j.RunningSince
	case j.LastSuccessStart != nil:
		lastGood = j.LastSuccessStart
	}
	if lastGood != nil {
		s := now.Sub(*lastGood).Seconds()
		j.SinceLastRun = &s
	}
	if j.LastFinishedStatus == "failed" && j.RunningSince == nil {
		since := "no run of it succeeded among the recent runs"
		if j.LastSuccessEnd != nil {
			since = "the last success ended " + dur(now.Sub(*j.LastSuccessEnd).Seconds()) + " ago"
		}
		return crit("failing: %d run(s) failed since the last success (%s); latest: %s (jobid %d, cron.job_run_details)%s",
			j.FailedSinceSuccess, since, firstLine(j.LastFailureMessage), j.JobID, failureHint(j.JobRuns))
	}
	if !j.Active {
		return warn("job is inactive: it does not run (pgquectl tick re-registers it)")
	}
	if j.Failed > 0 {
		return warn("%d failed run(s) in the last %s, the newest finished run succeeded; latest failure: %s (jobid %d)",
			j.Failed, dur(t.CronWindow.Seconds()), firstLine(j.LastFailureMessage), j.JobID)
	}
	if lastGood == nil {
		if !logRun {
			return unknown("cron.log_run is off: pg_cron keeps no run history to judge this job by")
		}
		// A freshly registered job (the hourly purge, say) has no run yet; a
		// ticker that never runs shows up as tick lag instead.
		return ok("no run recorded yet (a new job's first run is at most one schedule interval away)")
	}
	if j.Interval != nil && j.RunningSince == nil {
		warnAt := t.CronStaleWarnFactor**j.Interval + t.CronStaleGrace.Seconds()
		critAt := t.CronStaleCritFactor**j.Interval + t.CronStaleGrace.Seconds()
		switch {
		case t.CronStaleCritFactor > 0 && *j.SinceLastRun >= critAt:
			return crit("newest successful run started %s ago, schedule %q (CRIT from %s): is the pg_cron launcher running? (check max_worker_processes / the server log)",
				dur(*j.SinceLastRun), j.Schedule, dur(critAt))
		case t.CronStaleWarnFactor > 0 && *j.SinceLastRun >= warnAt:
			return warn("newest successful run started %s ago, schedule %q (WARN from %s)", dur(*j.SinceLastRun), j.Schedule, dur(warnAt))
		}
	}
	if j.RunningSince != nil {
		return ok("running since %s ago", dur(*j.SinceLastRun))
	}
	return ok("last run succeeded, started %s ago", dur(*j.SinceLastRun))
}

// firstLine is the first line of a server message, trimmed.
func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// failureHint says what usually fixes a failure pg_cron reports.
func failureHint(j cron.JobRuns) string {
	if strings.Contains(j.LastFailureMessage, "connection failed") {
		return fmt.Sprintf("; pg_cron could not connect to %s port %d (cron.job nodename / nodeport): check that the server listens there, cron.host, and pg_hba.conf for user %s",
			j.NodeName, j.NodePort, j.Username)
	}
	return ""
}

func bytesText(b float64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%.0f B", b)
	}
	exp, div := 0, float64(unit)
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", b/div, "KMGTP"[exp])
}

// quoteLiteral quotes s as an SQL string literal for advice text.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// events formats an event count: "1 event", "5 events".
func events(n int64) string {
	if n == 1 {
		return "1 event"
	}
	return strconv.FormatInt(n, 10) + " events"
}
