package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgstats"
)

func TestTickGapsCountHandoversFromRuns(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	ticks := []time.Time{ms(0), ms(10), ms(20), ms(320), ms(330), ms(400), ms(1400), ms(1410)}
	// Run 1 ends at 25 ms, run 2 starts at 310 ms (the 300 ms gap is a
	// handover); the 1000 ms gap has no run boundary in it; run 2 hands
	// over to run 3 at 1405 ms, inside the 10 ms gap.
	runs := []span{{ms(-500), ms(25)}, {ms(310), ms(1405)}, {ms(1405), time.Time{}}}
	maxGap, maxHandover, handovers := tickGaps(ticks, ms(0), ms(2000), runs)
	if maxGap != 1000 {
		t.Errorf("max gap %v, want 1000", maxGap)
	}
	if maxHandover != 300 {
		t.Errorf("max handover gap %v, want 300 (the gap holding run 2's start)", maxHandover)
	}
	if handovers != 2 {
		t.Errorf("handovers %d, want 2 (runs started inside the span)", handovers)
	}
	if _, h, n := tickGaps(ticks, ms(0), ms(2000), nil); h != 0 || n != 0 {
		t.Errorf("without pg_cron runs: handover gap %v, handovers %d; want 0, 0", h, n)
	}
}

func TestStallsDiagnoseGaps(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	log := strings.Join([]string{
		"2026-12-01 06:59:59.000 UTC [10] LOG:  checkpoint starting: time",
		"2026-12-01 07:00:00.150 UTC [11] LOG:  pgque: slow ticker round 120 ms",
		"2026-12-01 07:00:00.900 UTC [10] LOG:  checkpoint complete: wrote 10 buffers",
		"2026-12-01 07:00:05.000 UTC [12] LOG:  unrelated",
	}, "\n")
	path := filepath.Join(t.TempDir(), "postgresql.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	ticks := []time.Time{ms(0), ms(10), ms(130), ms(140), ms(180), ms(4000), ms(4010)}
	// PSI: CPU busy half of the time, I/O a quarter, every 100 ms.
	var psi []psiPoint
	for i := 0; i <= 50; i++ {
		psi = append(psi, psiPoint{ms(i * 100), int64(i) * 50_000, int64(i) * 25_000})
	}
	got := stalls(ticks, ms(0), ms(5000), psi, nil, path, nil)
	if len(got) != 2 {
		t.Fatalf("%d stalls, want 2 (120 ms and 3820 ms; 40 ms is under the threshold): %+v", len(got), got)
	}
	big, small := got[0], got[1]
	if big.Ms != 3820 || small.Ms != 120 {
		t.Fatalf("stalls %v / %v ms, want 3820 / 120, largest first", big.Ms, small.Ms)
	}
	if len(small.Checkpoint) != 2 || !strings.Contains(small.Checkpoint[0], "checkpoint starting") {
		t.Errorf("the 120 ms gap ran during a checkpoint: %q", small.Checkpoint)
	}
	if len(small.ServerLog) != 1 || !strings.Contains(small.ServerLog[0], "slow ticker round") {
		t.Errorf("the 120 ms gap's server log: %q", small.ServerLog)
	}
	if len(big.Checkpoint) != 2 { // the checkpoint ended at 900 ms, inside (180, 4000)
		t.Errorf("the 3820 ms gap overlaps the checkpoint: %q", big.Checkpoint)
	}
	if small.CPUPressure < 0.49 || small.CPUPressure > 0.51 || small.IOPressure < 0.24 || small.IOPressure > 0.26 {
		t.Errorf("pressure over the gap: CPU %.2f, I/O %.2f; want 0.50, 0.25", small.CPUPressure, small.IOPressure)
	}
}

// TestReportFlagsAConsumerThatFellBehind: a phase with events undelivered
// at the end of the drain has no latency: the targets say INVALID and the
// measured column says how many were left, never a percentile (before, the
// PgQue 0.2.0 cell printed p99 48565 ms, the driver's backlog, as a result).
func TestReportFlagsAConsumerThatFellBehind(t *testing.T) {
	cell := Phase{Name: "cron16-pgque-100hz-800-xmin-poll", System: SystemPgque, Cron: Cron16, Hz: 100, Rate: 800,
		Arrivals: ArrivalsPaced, HeldXmin: true, Wake: WakePoll}
	behind := PhaseResult{Phase: cell, Produced: 1000, Consumed: 600, Missing: 400, Latency: Latency{P50: 5, P99: 9, Max: 12}}
	var lines []string
	for _, tg := range targets(&Results{Phases: []PhaseResult{behind}}) {
		if strings.Contains(tg.what, "pg_cron 1.6: latency") {
			lines = append(lines, tg.measured+" | "+tg.verdict)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("%d pg_cron 1.6 latency targets, want 3: %q", len(lines), lines)
	}
	for _, l := range lines {
		if !strings.Contains(l, "invalid (400 undelivered)") || !strings.Contains(l, "**INVALID**") {
			t.Errorf("a phase with 400 events undelivered is judged %q, want invalid", l)
		}
	}
	ok := behind
	ok.Consumed, ok.Missing = 1000, 0
	for _, tg := range targets(&Results{Phases: []PhaseResult{ok}}) {
		if strings.Contains(tg.what, "pg_cron 1.6: latency p50") && (tg.measured != "5.0 ms" || tg.verdict != "met") {
			t.Errorf("a complete phase: p50 %q %q, want 5.0 ms, met", tg.measured, tg.verdict)
		}
	}
}

func TestLatencySplitDividesAtTheFirstTickAfterTheCommit(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	ticks := []time.Time{ms(0), ms(10), ms(20), ms(30)}
	rec := newRecorder()
	rec.committed([]int64{1}, ms(2))  // tick at 10: waits 8, received at 13: 3 after
	rec.committed([]int64{2}, ms(10)) // tick at 10 (same instant): waits 0, 5 after
	rec.committed([]int64{3}, ms(31)) // no tick after it: left out
	rec.got([]int64{1}, ms(13))
	rec.got([]int64{2}, ms(15))
	rec.got([]int64{3}, ms(40))
	s := rec.split(ticks)
	if s == nil || s.Events != 2 || s.WaitMean != 4 || s.AfterTickMean != 4 || s.TickIntervalMs != 10 {
		t.Fatalf("split = %+v, want 2 events, wait mean 4, after-tick mean 4, interval 10", s)
	}
	if rec.split(ticks[:1]) != nil {
		t.Fatal("one tick: want no split")
	}
}

// TestWALRatioPerProductionSecond: the 100 Hz / 1 Hz WAL ratio divides each
// phase's WAL by its production seconds, not by the span of the WAL reading:
// the 1 Hz drain waits ~1 s for the last tick, and counting that wait as
// production made the 2026-12-01-full-4 run (these numbers) 1.21×, MISSED.
func TestWALRatioPerProductionSecond(t *testing.T) {
	phase := func(hz int, bytes int64, seconds, walSeconds float64) PhaseResult {
		p := PhaseResult{Phase: Phase{Name: fmt.Sprintf("pgque-%dhz-800-poll", hz), System: SystemPgque, Hz: hz, Rate: 800, Wake: WakePoll},
			Seconds: seconds, Produced: 36004, Consumed: 36004}
		p.setWAL(pgstats.WALRate{Bytes: bytes, Seconds: walSeconds})
		return p
	}
	r := &Results{Phases: []PhaseResult{phase(1, 9812128, 45.014, 45.994), phase(100, 11614888, 45.016, 45.032)}}
	for _, tg := range targets(r) {
		if strings.HasPrefix(tg.what, "WAL 100 Hz / WAL 1 Hz") {
			if !strings.HasPrefix(tg.measured, "1.18×") || tg.verdict != "met" || !strings.Contains(tg.measured, "323 B vs 273 B") {
				t.Fatalf("WAL ratio judged %q %q, want 1.18× (323 B vs 273 B per event), met", tg.measured, tg.verdict)
			}
			return
		}
	}
	t.Fatal("no WAL ratio target")
}

// TestReportPgQWALRatioNotComparableWhenBehind: PgQ's 100 Hz consumer fell
// behind in 2026-12-02-full-5 (34,148 of 36,004 events undelivered) and the
// report still printed its WAL ratio (1.13×) as if it had done the same work.
func TestReportPgQWALRatioNotComparableWhenBehind(t *testing.T) {
	phase := func(hz int, missing int) PhaseResult {
		return PhaseResult{Phase: Phase{Name: fmt.Sprintf("pgq-%dhz-800-poll", hz), System: SystemPgQ, Hz: hz, Rate: 800, Wake: WakePoll},
			Seconds: 45, Produced: 36004, Consumed: 36004 - missing, Missing: missing, WALBytesPerSec: 1000 * float64(hz+100)}
	}
	md := markdown(&Results{Phases: []PhaseResult{phase(1, 0), phase(100, 34148)}}, nil)
	if !strings.Contains(md, "PgQ + pgqd WAL 100 Hz / 1 Hz at 800 ev/s: not comparable (34148 and 0 events undelivered") {
		t.Fatalf("a PgQ ratio over a phase whose consumer fell behind is not flagged:\n%s", md)
	}
	md = markdown(&Results{Phases: []PhaseResult{phase(1, 0), phase(100, 0)}}, nil)
	if !strings.Contains(md, "PgQ + pgqd WAL 100 Hz / 1 Hz at 800 ev/s: 1.98×.") {
		t.Fatalf("complete PgQ phases: ratio missing:\n%s", md)
	}
}

// TestProcOverSplitsAGap: the ticker backend's on-CPU and run-queue time
// over a gap come from the schedstat samples bracketing it, per backend
// (two during a handover), with the wait events seen and the steal time.
func TestProcOverSplitsAGap(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var ps []procPoint
	for i := 0; i <= 20; i++ { // every 20 ms for 400 ms
		p := procPoint{at: ms(i * 20), steal: int64(i) * 5e6} // 5 ms stolen per sample
		wait := "Timeout:PgSleep"
		if i >= 5 && i <= 12 { // 100..240 ms: stuck on I/O
			wait = "IO:DataFileRead"
		}
		// pid 7 runs 2 ms and waits 1 ms for a CPU per sample.
		p.procs = append(p.procs, procSample{pid: 7, run: int64(i) * 2e6, queue: int64(i) * 1e6, ok: true, queried: true, wait: wait})
		if i >= 10 { // a second backend from 200 ms on (a handover)
			p.procs = append(p.procs, procSample{pid: 9, run: int64(i-10) * 10e6, ok: true, queried: i%5 == 0})
		}
		ps = append(ps, p)
	}
	splits, steal := procOver(ps, ms(100), ms(240))
	if steal != 35 {
		t.Errorf("steal %.1f ms over samples 100..240 ms, want 35", steal)
	}
	if len(splits) != 2 || splits[0].Pid != 7 || splits[1].Pid != 9 {
		t.Fatalf("splits %+v, want pids 7 and 9", splits)
	}
	if a := splits[0]; a.OnCPUMs != 14 || a.RunQueueMs != 7 || a.WaitEvents["IO:DataFileRead"] != 8 || a.Samples != 8 {
		t.Errorf("pid 7: %+v, want on CPU 14 ms, run queue 7 ms, 8 samples all IO:DataFileRead", a)
	}
	// pid 9's wait event was read once (sample 200 ms; the sampler asks
	// pg_stat_activity every 100 ms), its schedstat every 20 ms.
	if b := splits[1]; b.OnCPUMs != 20 || b.WaitEvents[""] != 1 || b.Samples != 1 {
		t.Errorf("pid 9: %+v, want on CPU 20 ms (samples 200..240), 1 sample with no wait event", b)
	}
	if got := procText(Stall{Ticker: splits, StealMs: steal}); !strings.Contains(got, "IO:DataFileRead×8") || !strings.Contains(got, "steal 35 ms") || !strings.Contains(got, "none×1") {
		t.Errorf("procText: %q", got)
	}
	if s, st := procOver(nil, ms(0), ms(10)); s != nil || st != -1 {
		t.Errorf("no samples: %v, %v; want nil, -1", s, st)
	}
}

// TestStallCauseReadsTheEvidence: each kind of evidence gives its cause,
// the strongest first, and a missed maximum names its largest gap's cause.
func TestStallCauseReadsTheEvidence(t *testing.T) {
	split := func(cpu, rq float64, waits map[string]int) []ProcSplit {
		n := 0
		for _, c := range waits {
			n += c
		}
		return []ProcSplit{{Pid: 1, OnCPUMs: cpu, RunQueueMs: rq, WaitEvents: waits, Samples: n}}
	}
	cases := []struct {
		s    Stall
		want string
	}{
		{Stall{Ms: 100, StealMs: 40, Ticker: split(10, 50, map[string]int{"": 5})}, "hypervisor steal: 40 ms"},
		{Stall{Ms: 100, Ticker: split(10, 60, map[string]int{"": 5})}, "CPU starvation: the ticker backend waited 60 ms for a CPU"},
		{Stall{Ms: 100, Ticker: split(5, 5, map[string]int{"IO:DataFileRead": 4, "": 1})}, "blocked: the ticker backend was seen waiting on IO:DataFileRead in 4 of 5 samples"},
		{Stall{Ms: 100, Ticker: split(70, 5, map[string]int{"": 5})}, "the ticker's own work: 70 ms on a CPU"},
		{Stall{Ms: 100, Ticker: split(2, 1, map[string]int{"Timeout:PgSleep": 5})}, "the ticker slept between rounds (5 of 5 samples)"},
		{Stall{Ms: 100, Ticker: split(20, 20, map[string]int{"": 5})}, "unattributed"},
		{Stall{Ms: 100}, "not measured"},
		{Stall{Ms: 100, Handover: true, Ticker: split(10, 60, nil)}, "pg_cron handover; CPU starvation"},
	}
	for i, c := range cases {
		if got := stallCause(c.s); !strings.Contains(got, c.want) {
			t.Errorf("case %d: cause %q, want it to contain %q", i, got, c.want)
		}
	}
	p := PhaseResult{Stalls: []Stall{{Ms: 150, From: time.Date(2026, 12, 2, 0, 31, 40, 311e6, time.UTC), Ticker: split(10, 120, nil)}}}
	if got := missNote(p, false); !strings.Contains(got, "the largest tick gap, 150 ms at 00:31:40.311: CPU starvation") {
		t.Errorf("missNote: %q", got)
	}
	// The slowest event committed inside a smaller gap: that gap's cause.
	small := Stall{Ms: 97, From: time.Date(2026, 12, 2, 0, 35, 0, 0, time.UTC), Ticker: split(90, 5, map[string]int{"": 5})}
	small.To = small.From.Add(97 * time.Millisecond)
	p.Stalls = append(p.Stalls, small)
	p.WorstEvents = []Gap{{At: small.From.Add(10 * time.Millisecond), Ms: 99}}
	if got := missNote(p, false); !strings.Contains(got, "the tick gap its slowest event waited in, 97 ms at 00:35:00.000: the ticker's own work: 90 ms on a CPU") {
		t.Errorf("missNote with the slowest event in the smaller gap: %q", got)
	}
	if got := missNote(p, true); got != "" {
		t.Errorf("missNote for a met target: %q, want empty", got)
	}
}
