package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	var ms []float64
	for i := 100; i >= 1; i-- {
		ms = append(ms, float64(i))
	}
	d := summarize(ms)
	want := Dist{Count: 100, Mean: 50.5, P50: 50, P90: 90, P99: 99, Max: 100}
	if *d != want {
		t.Errorf("summarize(1..100) = %+v, want %+v", *d, want)
	}
	if d := summarize(nil); d.Count != 0 {
		t.Errorf("summarize(nil) = %+v", d)
	}
}

func verdicts(ts []Target) map[string]string {
	out := map[string]string{}
	for _, t := range ts {
		out[t.Name] = t.Status
	}
	return out
}

// TestTargets judges each goal from the cells: met, MISSED (a missing
// message fails a latency goal whatever the percentiles), not available
// in a build without the hot-list, not measured without the cells.
func TestTargets(t *testing.T) {
	t.Parallel()
	measured := func(c *Cell) *Cell { c.Status = StatusMeasured; return c }
	res := &Results{Params: Params{LatencyRate: 1000}, Cells: []*Cell{
		measured(&Cell{Name: "latency-off", Kind: "latency", Latency: &Dist{Count: 10, P50: 2.5, P99: 14}}),
		measured(&Cell{Name: "latency-2brokers", Kind: "latency", Latency: &Dist{Count: 10, P50: 1, P99: 2}, Missing: 1}),
		{Name: "latency-on", Kind: "latency", Hotlist: "on", Brokers: 1, Status: StatusNotAvailable},
		measured(&Cell{Name: "push-batch100", Kind: "push", PushRate: 19999}),
		measured(&Cell{Name: "wildcard-100-on", Kind: "wildcard", Partitions: 100, Hotlist: "on", PGPopMsPerPop: 0.2}),
		measured(&Cell{Name: "wildcard-10000-on", Kind: "wildcard", Partitions: 10000, Hotlist: "on", PGPopMsPerPop: 0.31}),
		measured(&Cell{Name: "wildcard-10000-off", Kind: "wildcard", Partitions: 10000, Hotlist: "off", PGPopMsPerPop: 6.3}),
	}}
	res.Targets = targets(res)
	got := verdicts(res.Targets)
	want := map[string]string{
		"latency-off: push→pop p50 at 1k msg/s":                                            verdictMet,
		"latency-off: push→pop p99 at 1k msg/s":                                            verdictMet,
		"latency-on: push→pop p50 at 1k msg/s":                                             StatusNotAvailable,
		"latency-2brokers: push→pop p50 at 1k msg/s":                                       verdictMissed,
		"push throughput, batches of 100":                                                  verdictMissed,
		"wildcard pop at 10,000 partitions: PostgreSQL time per pop, off ÷ on":             verdictMet,    // 20.3×
		"wildcard pop, hot-list on: PostgreSQL time per pop at 10,000 ÷ at 100 partitions": verdictMissed, // 1.55×
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s: %q, want %q", name, got[name], v)
		}
	}

	// --latency-rate other than 1,000: shown, not judged.
	slow := *res
	slow.Params.LatencyRate = 100
	for _, tg := range targets(&slow) {
		if strings.HasPrefix(tg.Name, "latency-off") && (tg.Status != "not judged" || !strings.Contains(tg.Got, "at 100 msg/s")) {
			t.Errorf("%s at 100 msg/s: %q %q, want not judged", tg.Name, tg.Status, tg.Got)
		}
	}

	// The quick profile: no 10,000 cells.
	quick := &Results{Cells: []*Cell{measured(&Cell{Name: "wildcard-100-on", PGPopMsPerPop: 0.2})}}
	for _, tg := range targets(quick) {
		if strings.HasPrefix(tg.Name, "wildcard") && !strings.HasPrefix(tg.Status, verdictNotMeasured) {
			t.Errorf("%s without 10,000 cells: %q", tg.Name, tg.Status)
		}
	}
	report := renderReport(res)
	if !strings.Contains(report, "| latency-on | on | 1 |") || !strings.Contains(report, "| latency-on: push→pop p50 at 1k msg/s | ≤ 3 ms | — | "+StatusNotAvailable+" |") {
		t.Errorf("report does not show the unavailable cell:\n%s", report)
	}
}

// TestReportBusyLineJudgesTheLoadBeforeTheRun: the load average at the end
// counts the benchmark's own processes, so only a busy start (other work)
// marks the run as done on a busy machine. Before, a quiet start with the
// benchmark's own load of 8.9 at the end was reported as "busy, mostly not
// this benchmark".
func TestReportBusyLineJudgesTheLoadBeforeTheRun(t *testing.T) {
	t.Parallel()
	quiet := &Results{Machine: Machine{NProc: 2, LoadStart: [3]float64{0.4, 1.5, 1.9}, LoadEnd: [3]float64{8.9, 7.5, 4.9}}}
	if got := renderReport(quiet); strings.Contains(got, "machine was busy") {
		t.Error("a run that started on a quiet machine is reported busy (its own load at the end)")
	}
	busy := &Results{Machine: Machine{NProc: 2, LoadStart: [3]float64{3.2, 2.5, 2.0}, LoadEnd: [3]float64{4, 4, 4}}}
	if got := renderReport(busy); !strings.Contains(got, "**The machine was busy before the run** (load average 3.2 on 2 CPUs, from other work)") {
		t.Error("a run that started on a busy machine is not reported busy")
	}
}
