package status

import (
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgstats"

	"github.com/pgquectl/pgquectl/internal/cron"
)

func ptr[T any](v T) *T { return &v }

func TestWorstOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ a, b, want Level }{
		{OK, Warn, Warn}, {Warn, Unknown, Warn}, {Unknown, OK, Unknown}, {Crit, Warn, Crit}, {Unknown, Crit, Crit},
	} {
		if got := Worst(tc.a, tc.b); got != tc.want {
			t.Errorf("Worst(%s, %s) = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
	for _, l := range []Level{OK, Warn, Crit, Unknown} {
		var back Level
		text, _ := l.MarshalText()
		if err := back.UnmarshalText(text); err != nil || back != l || l.ExitCode() != int(l) {
			t.Errorf("level %s round trip: %s, %v", l, back, err)
		}
	}
}

func TestScheduleInterval(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]float64{
		"1 seconds": 1, "10 seconds": 10, "* * * * *": 60, "*/5 * * * *": 300, "17 * * * *": 3600,
		"1-59/2 * * * *": 120, "0-58/2 * * * *": 120, "0-59/5 * * * *": 300,
		"0 0 1 1 *": -1, "@hourly": -1, "0 seconds": -1, "1-5 * * * *": -1, "1-30/2 * * * *": -1, "5-2/2 * * * *": -1,
	} {
		got, ok := scheduleInterval(s)
		if (want < 0 && ok) || (want >= 0 && (!ok || got != want)) {
			t.Errorf("scheduleInterval(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
}

func TestJobVerdict(t *testing.T) {
	t.Parallel()
	th := DefaultThresholds()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { return ptr(now.Add(-d)) }
	for _, tc := range []struct {
		name string
		job  cron.JobRuns
		want Level
		says string
	}{
		{"running loop", cron.JobRuns{Schedule: "* * * * *", Active: true, LastStatus: "running", LastFinishedStatus: "succeeded",
			RunningSince: ago(30 * time.Second), LastSuccessStart: ago(91 * time.Second), LastSuccessEnd: ago(31 * time.Second)}, OK, "running since 30s"},
		{"failing", cron.JobRuns{Schedule: "* * * * *", Active: true, Failed: 2, FailedSinceSuccess: 2, LastFinishedStatus: "failed",
			LastFailureMessage: "ERROR:  boom\nCONTEXT: x", LastStatus: "failed"}, Crit, "2 run(s) failed since the last success"},
		// pg_cron could not connect: no start time, the newest run failed.
		{"connection failed", cron.JobRuns{Schedule: "* * * * *", Active: true, Failed: 3, FailedSinceSuccess: 3, LastFinishedStatus: "failed",
			LastFailureMessage: "connection failed", LastStatus: "failed", NodeName: "localhost", NodePort: 5999, Username: "app",
			LastSuccessStart: ago(time.Hour), LastSuccessEnd: ago(time.Hour)}, Crit, "pg_cron could not connect to localhost port 5999"},
		{"recovered", cron.JobRuns{Schedule: "* * * * *", Active: true, Failed: 1, LastFinishedStatus: "succeeded", LastStatus: "succeeded",
			LastFailureMessage: "ERROR:  boom", LastSuccessStart: ago(time.Second), LastSuccessEnd: ago(time.Second)}, Warn, "newest finished run succeeded"},
		{"inactive", cron.JobRuns{Schedule: "* * * * *"}, Warn, "inactive"},
		{"never ran", cron.JobRuns{Schedule: "* * * * *", Active: true}, OK, "no run recorded"},
		{"stale warn", cron.JobRuns{Schedule: "* * * * *", Active: true, LastStatus: "succeeded", LastFinishedStatus: "succeeded",
			LastSuccessStart: ago(151 * time.Second), LastSuccessEnd: ago(150 * time.Second)}, Warn, "WARN from 2m30s"},
		{"stale crit", cron.JobRuns{Schedule: "1 seconds", Active: true, LastStatus: "succeeded", LastFinishedStatus: "succeeded",
			LastSuccessStart: ago(36 * time.Second), LastSuccessEnd: ago(35 * time.Second)}, Crit, "CRIT from 35s"},
		{"yearly", cron.JobRuns{Schedule: "0 0 1 1 *", Active: true, LastStatus: "succeeded", LastFinishedStatus: "succeeded",
			LastSuccessStart: ago(1000 * time.Hour)}, OK, "last run succeeded"},
	} {
		row := JobRow{JobRuns: tc.job}
		v := jobVerdict(&row, true, now, th)
		if v.Level != tc.want || !strings.Contains(v.Reason, tc.says) || strings.Contains(v.Reason, "\n") {
			t.Errorf("%s: %s %q; want %s saying %q", tc.name, v.Level, v.Reason, tc.want, tc.says)
		}
	}
	row := JobRow{JobRuns: cron.JobRuns{Schedule: "* * * * *", Active: true}}
	if v := jobVerdict(&row, false, now, th); v.Level != Unknown || !strings.Contains(v.Reason, "cron.log_run") {
		t.Errorf("no history with log_run off: %+v", v)
	}
}

func TestQueueVerdict(t *testing.T) {
	t.Parallel()
	th := DefaultThresholds()
	q := func(lag float64, newEvents int64, period *int32) *QueueRow {
		return &QueueRow{QueueInfo: pgstats.QueueInfo{Name: "q", TickerLag: &lag, NewEvents: &newEvents,
			TickPeriodMS: period, TickerMaxLag: 3, TickerIdlePeriod: 60, RotationPeriod: 7200}}
	}
	for _, tc := range []struct {
		name string
		row  *QueueRow
		want Level
	}{
		{"classic, 3 s lag, events", q(3, 5, nil), OK},
		{"classic, WARN from 9 s", q(9, 5, nil), Warn},
		{"classic, CRIT from 30 s", q(30, 5, nil), Crit},
		{"10 ms period, WARN from 3 s", q(3, 1, ptr[int32](10)), Warn},
		{"10 ms period, CRIT from 10 s", q(10, 1, ptr[int32](10)), Crit},
		{"idle 2 min", q(120, 0, nil), OK},
		{"idle 3 idle periods", q(180, 0, nil), Warn},
	} {
		if v := queueVerdict(tc.row, th); v.Level != tc.want {
			t.Errorf("%s: %s %q, want %s", tc.name, v.Level, v.Reason, tc.want)
		}
	}
	// A 10 ms period without a classic consumer: the engine ticks the
	// queue by the classic thresholds (ticker_max_lag 3 s), and so is it
	// judged - WARN from 9 s, not from 3 s.
	for _, tc := range []struct {
		lag  float64
		want Level
	}{{5, OK}, {9, Warn}, {30, Crit}} {
		row := q(tc.lag, 100, ptr[int32](10))
		row.NoClassicConsumer = true
		if v := queueVerdict(row, th); v.Level != tc.want {
			t.Errorf("10 ms period, no classic consumer, %v s lag: %s %q, want %s", tc.lag, v.Level, v.Reason, tc.want)
		}
	}
	paused := q(0, 0, nil)
	paused.TickerPaused = true
	if v := queueVerdict(paused, th); v.Level != Warn || !strings.Contains(v.Reason, "paused") {
		t.Errorf("paused: %+v", v)
	}
	pinned := q(0, 0, nil)
	pinned.SinceRotation, pinned.PinnedBy, pinned.PinnedByLag = ptr(7.0*3600), "slow", ptr(7.0*3600)
	if v := queueVerdict(pinned, th); v.Level != Warn || !strings.Contains(v.Reason, "consumer slow pins it") {
		t.Errorf("rotation pinned: %+v", v)
	}
}

func TestFamiliesBounds(t *testing.T) {
	t.Parallel()
	th := DefaultThresholds()
	th.EventDeadMax = 0
	fams := families([]pgstats.TableStat{
		{Name: "tick_0", Kind: pgstats.KindTick, DeadTuples: 150},
		{Name: "tick_1", Kind: pgstats.KindTick, DeadTuples: 60},
		{Name: "subscription_0", Kind: pgstats.KindSubscription, DeadTuples: 2000},
		{Name: "event_1_0", Kind: pgstats.KindEvent, DeadTuples: 1},
		{Name: "queue", Kind: pgstats.KindOther, DeadTuples: 99999},
	}, th)
	got := map[pgstats.TableKind]FamilyRow{}
	for _, f := range fams {
		got[f.Kind] = f
	}
	if f := got[pgstats.KindTick]; f.Level != Warn || f.DeadTuples != 210 || f.WorstName != "tick_0" || f.CritAt != 800 {
		t.Errorf("tick: %+v", f)
	}
	if f := got[pgstats.KindSubscription]; f.Level != Crit {
		t.Errorf("subscription: %+v", f)
	}
	if f := got[pgstats.KindEvent]; f.Level != Warn || f.CritAt != 0 {
		t.Errorf("event with bound 0: WARN on any dead tuple, no CRIT level: %+v", f)
	}
	if _, found := got[pgstats.KindOther]; found || len(fams) != 3 {
		t.Errorf("other tables are not judged: %+v", fams)
	}
}

func TestSlotAndPreparedVerdicts(t *testing.T) {
	t.Parallel()
	th := DefaultThresholds()
	if v := slotVerdict(pgstats.Slot{Name: "s", Type: "physical", Xmin: ptr("900"), XminAgeXIDs: ptr[int64](100)}); v.Level != Warn || !strings.Contains(v.Reason, "pg_drop_replication_slot('s')") {
		t.Errorf("inactive slot with xmin: %+v", v)
	}
	if v := slotVerdict(pgstats.Slot{Name: "s", Type: "logical", CatalogXmin: ptr("900")}); v.Level != OK {
		t.Errorf("catalog_xmin only: %+v", v)
	}
	p := pgstats.PreparedXact{GID: "it's", Owner: "app", SameDatabase: true, Age: 400}
	if v := preparedVerdict(p, th); v.Level != Crit || !strings.Contains(v.Reason, "ROLLBACK PREPARED 'it''s'") {
		t.Errorf("old prepared transaction: %+v", v)
	}
	p.SameDatabase = false
	if v := preparedVerdict(p, th); v.Level != OK {
		t.Errorf("prepared transaction of another database: %+v", v)
	}
	b := pgstats.Backend{PID: 7, SameDatabase: true, XactAge: ptr(61.0), User: "u"}
	if v := backendVerdict(b, "mon", th); v.Level != Warn || !strings.Contains(v.Reason, "pid 7") {
		t.Errorf("backend 61 s: %+v", v)
	}
	b.Hidden, b.XactAge = true, nil
	if v := backendVerdict(b, "mon", th); v.Level != Unknown || !strings.Contains(v.Reason, "GRANT pg_monitor TO mon") {
		t.Errorf("hidden backend: %+v", v)
	}
	b.SameDatabase, b.Database = false, "other"
	if v := backendVerdict(b, "mon", th); v.Level != OK {
		t.Errorf("backend of another database: %+v", v)
	}
}

func TestThresholdsValidate(t *testing.T) {
	t.Parallel()
	if err := DefaultThresholds().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := DefaultThresholds()
	bad.XminWarn, bad.XminCrit = 10*time.Minute, time.Minute
	bad.TickDeadMax = -1
	bad.DeadCritFactor = 0.5
	err := bad.Validate()
	for _, want := range []string{"xmin: WARN", "tick dead max", "CRIT factor"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to mention %q", err, want)
		}
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	r := &Report{Session: &pgstats.SessionInfo{Database: "app"}}
	r.Engine.Verdict = ok("fine")
	r.Xmin.Oldest = crit("pid 1 held it\nlong")
	r.Cron.Ticking = warn("nothing ticks")
	finish(r)
	if r.Level != Crit {
		t.Errorf("level %s", r.Level)
	}
	want := "PGQUE CRIT - database app: "
	if !strings.HasPrefix(r.Summary, want) || strings.Contains(r.Summary, "\n") || strings.Contains(r.Summary, "|") ||
		strings.Index(r.Summary, "CRIT xmin horizon") > strings.Index(r.Summary, "WARN ticking") {
		t.Errorf("summary %q: want one line, CRIT reasons before WARN, no '|' (monitoring plugins read it as perfdata)", r.Summary)
	}
}

// TestTickingIgnoresOneTickerJobsPauseWhenTwoTakeTurns: with two ticker
// jobs (pg_cron 1.4 runs them on alternate minutes), one job's 56 s
// between its runs is the other's turn, not a pause in ticking: the
// ticking reason does not report it. With one ticker job it does.
func TestTickingIgnoresOneTickerJobsPauseWhenTwoTakeTurns(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 13, 0, 30, 0, time.UTC)
	job := func(name, sched string) JobRow {
		return JobRow{JobRuns: cron.JobRuns{Name: name, Schedule: sched, Command: "CALL pgque.ticker_loop()", Active: true,
			LastFinishedStatus: "succeeded", LargestGap: ptr(56.5), LargestGapAt: ptr(now.Add(-2 * time.Minute))}, Verdict: ok("fine")}
	}
	for _, tc := range []struct {
		jobs      []JobRow
		wantPause bool
	}{
		{[]JobRow{job("pgque_ticker@db", "*/2 * * * *"), job("pgque_ticker_2@db", "1-59/2 * * * *")}, false},
		{[]JobRow{job("pgque_ticker@db", "* * * * *")}, true},
	} {
		r := &Report{Session: &pgstats.SessionInfo{Database: "db", Now: now}}
		r.Cron.Jobs = tc.jobs
		(&Collector{}).judgeTicking(r)
		if got := strings.Contains(r.Cron.Ticking.Reason, "longest pause between ticker runs"); got != tc.wantPause {
			t.Errorf("%d ticker job(s): reason %q; want the pause between one job's runs reported: %v", len(tc.jobs), r.Cron.Ticking.Reason, tc.wantPause)
		}
	}
}

// TestTickingWarnsOfAJobSetWithOneTickerJob: the engine registers two
// ticker jobs; an install whose pg_cron still has one (registered by an
// older engine, kept until pgquectl tick is re-run) gets a WARN that says
// to re-run pgquectl tick. Two jobs are OK.
func TestTickingWarnsOfAJobSetWithOneTickerJob(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 13, 0, 30, 0, time.UTC)
	job := func(name, sched string) JobRow {
		return JobRow{JobRuns: cron.JobRuns{Name: name, Schedule: sched, Command: "CALL pgque.ticker_loop()", Active: true,
			LastFinishedStatus: "succeeded"}, Verdict: ok("fine")}
	}
	for _, tc := range []struct {
		jobs []JobRow
		want Level
	}{
		{[]JobRow{job("pgque_ticker@db", "*/2 * * * *"), job("pgque_ticker_2@db", "1-59/2 * * * *")}, OK},
		{[]JobRow{job("pgque_ticker@db", "1 seconds"), job("pgque_ticker_2@db", "1 seconds")}, OK},
		{[]JobRow{job("pgque_ticker@db", "* * * * *")}, Warn},
	} {
		r := &Report{Session: &pgstats.SessionInfo{Database: "db", Now: now}}
		r.Cron.Jobs = tc.jobs
		(&Collector{}).judgeTicking(r)
		if r.Cron.Ticking.Level != tc.want {
			t.Errorf("%d ticker job(s): ticking %s (%s), want %s", len(tc.jobs), r.Cron.Ticking.Level, r.Cron.Ticking.Reason, tc.want)
		}
		if tc.want == Warn && !strings.Contains(r.Cron.Ticking.Reason, "re-run pgquectl tick") {
			t.Errorf("reason %q does not say to re-run pgquectl tick", r.Cron.Ticking.Reason)
		}
	}
}
