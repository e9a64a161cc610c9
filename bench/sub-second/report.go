package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Output file names in OutDir.
const (
	fileJSON      = "results.json"
	fileReport    = "report.md"
	fileCDF       = "latency-cdf.svg"
	fileDeadTuple = "dead-tuples.svg"
)

func writeOutputs(dir string, r *Results) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, fileJSON), raw, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", fileJSON, err)
	}
	var chartErrs []string
	if err := cdfChart(filepath.Join(dir, fileCDF), r); err != nil {
		chartErrs = append(chartErrs, err.Error())
	}
	if err := deadChart(filepath.Join(dir, fileDeadTuple), r); err != nil {
		chartErrs = append(chartErrs, err.Error())
	}
	md := markdown(r, chartErrs)
	if err := os.WriteFile(filepath.Join(dir, fileReport), []byte(md), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", fileReport, err)
	}
	return nil
}

// Rerender writes report.md and the charts again from dir/results.json.
func Rerender(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, fileJSON))
	if err != nil {
		return fmt.Errorf("reading %s: %w", fileJSON, err)
	}
	var r Results
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("parsing %s: %w", fileJSON, err)
	}
	return writeOutputs(dir, &r)
}

// cdfChart: one line per phase that carried events (log-scaled latency axis).
func cdfChart(path string, r *Results) error {
	p := plot.New()
	p.Title.Text = "producer commit → consumer receive latency (CDF)"
	p.X.Label.Text = "latency (ms, log scale)"
	p.Y.Label.Text = "fraction of events"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = false
	p.Legend.Left = false
	var lines []any
	for _, ph := range r.Phases {
		if len(ph.CDF) == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, len(ph.CDF))
		for _, c := range ph.CDF {
			pts = append(pts, plotter.XY{X: max(c.Ms, 0.1), Y: c.Frac})
		}
		lines = append(lines, ph.Name, pts)
	}
	if len(lines) == 0 {
		return nil
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return fmt.Errorf("latency chart: %w", err)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	if err := p.Save(10*vg.Inch, 6*vg.Inch, path); err != nil {
		return fmt.Errorf("saving %s: %w", path, err)
	}
	return nil
}

// deadChart: dead tuples of the tick and subscription tables over time, for
// the phases that held the xmin horizon.
func deadChart(path string, r *Results) error {
	p := plot.New()
	p.Title.Text = "dead tuples while a REPEATABLE READ transaction holds xmin"
	p.X.Label.Text = "seconds into the phase"
	p.Y.Label.Text = "dead tuples (pgstattuple, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var lines []any
	for _, ph := range r.Phases {
		if !ph.HeldXmin || len(ph.Samples) == 0 {
			continue
		}
		tick := make(plotter.XYs, 0, len(ph.Samples))
		sub := make(plotter.XYs, 0, len(ph.Samples))
		for _, s := range ph.Samples {
			tick = append(tick, plotter.XY{X: s.T, Y: float64(max(s.DeadTick, 1))})
			sub = append(sub, plotter.XY{X: s.T, Y: float64(max(s.DeadSub, 1))})
		}
		lines = append(lines, ph.Name+" tick", tick, ph.Name+" subscription", sub)
	}
	if len(lines) == 0 {
		return nil
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return fmt.Errorf("dead tuple chart: %w", err)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	_ = color.Black
	if err := p.Save(10*vg.Inch, 6*vg.Inch, path); err != nil {
		return fmt.Errorf("saving %s: %w", path, err)
	}
	return nil
}

// find returns the first phase matching pred.
func (r *Results) find(pred func(PhaseResult) bool) (PhaseResult, bool) {
	for _, p := range r.Phases {
		if pred(p) {
			return p, true
		}
	}
	return PhaseResult{}, false
}

func headline(system string) func(PhaseResult) bool {
	return func(p PhaseResult) bool {
		return p.System == system && p.Hz == 100 && p.Rate == 800 && p.HeldXmin && p.Wake == WakePoll && p.Rotation == 0
	}
}

func cell(system string, hz, rate int, xmin bool, queues int) func(PhaseResult) bool {
	return func(p PhaseResult) bool {
		return p.System == system && p.Hz == hz && p.Rate == rate && p.HeldXmin == xmin && p.Wake == WakePoll &&
			p.Rotation == 0 && (rate > 0 || p.Queues == queues)
	}
}

type target struct {
	what, goal, measured, verdict string
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**MISSED**"
}

func targets(r *Results) []target {
	var out []target
	notMeasured := func(what, goal string) {
		out = append(out, target{what, goal, "not measured in this profile", "—"})
	}
	if h, ok := r.find(headline(SystemPgque)); ok {
		l := h.Latency
		out = append(out,
			target{"latency p50, 100 Hz, 800 ev/s, xmin held, poll-only (" + h.Name + ")", "≤ 8 ms", f1(l.P50) + " ms", verdict(l.P50 <= 8)},
			target{"latency p99, same", "≤ 25 ms", f1(l.P99) + " ms", verdict(l.P99 <= 25)},
			target{"latency max, same (over " + h.Duration.String() + ")", "≤ 60 ms", f1(l.Max) + " ms", verdict(l.Max <= 60)},
			target{fmt.Sprintf("largest tick gap at a pg_cron slot handover (%d handovers)", h.Handovers), "≤ 100 ms", f1(h.MaxHandoverGapMs) + " ms", verdict(h.MaxHandoverGapMs <= 100)},
			target{"peak dead tuples, tick tables", "≤ 200", fmt.Sprint(h.PeakDeadTick), verdict(h.PeakDeadTick <= 200)},
			target{"peak dead tuples, subscription tables", "≤ 500", fmt.Sprint(h.PeakDeadSub), verdict(h.PeakDeadSub <= 500)},
			target{"dead tuples, event tables", "0", fmt.Sprint(h.PeakDeadEvent), verdict(h.PeakDeadEvent == 0)},
		)
	} else {
		notMeasured("latency / dead tuples at 100 Hz, xmin held", "p50 ≤ 8, p99 ≤ 25, max ≤ 60 ms")
	}
	if t, ok := r.find(func(p PhaseResult) bool {
		return p.System == SystemPgque && p.Hz == 10 && p.Rate == 800 && p.Wake == WakePoll
	}); ok {
		out = append(out,
			target{"latency p50 at 10 Hz (" + t.Name + ")", "≤ 55 ms", f1(t.Latency.P50) + " ms", verdict(t.Latency.P50 <= 55)},
			target{"latency p99 at 10 Hz", "≤ 105 ms", f1(t.Latency.P99) + " ms", verdict(t.Latency.P99 <= 105)})
	}
	hi, ok1 := r.find(cell(SystemPgque, 100, 800, false, 1))
	lo, ok2 := r.find(cell(SystemPgque, 1, 800, false, 1))
	if ok1 && ok2 && lo.WALBytesPerSec > 0 {
		ratio := hi.WALBytesPerSec / lo.WALBytesPerSec
		out = append(out, target{"WAL 100 Hz / WAL 1 Hz at 800 ev/s", "≤ 1.2×",
			fmt.Sprintf("%.2f× (%s/s vs %s/s)", ratio, human(hi.WALBytesPerSec), human(lo.WALBytesPerSec)), verdict(ratio <= 1.2)})
	} else {
		notMeasured("WAL 100 Hz / WAL 1 Hz at 800 ev/s", "≤ 1.2×")
	}
	idle, ok1 := r.find(cell(SystemPgque, 100, 0, false, 100))
	// The baseline: ticking at 100 Hz with no (or one) idle queue.
	none, ok2 := r.find(func(p PhaseResult) bool {
		return p.System == SystemPgque && p.Hz == 100 && p.Rate == 0 && p.Queues <= 1
	})
	if ok1 {
		add := idle.WALBytesPerSec
		how := "total WAL of the phase (no 0-queue phase to subtract)"
		if ok2 {
			add -= none.WALBytesPerSec
			how = fmt.Sprintf("%s/s with 100 idle queues − %s/s with %d (%s); negative = below the noise", human(idle.WALBytesPerSec), human(none.WALBytesPerSec), none.Queues, none.Name)
		}
		out = append(out, target{"WAL added by 100 idle queues at 100 Hz", "< 1 KiB/s",
			fmt.Sprintf("%s/s (%s)", human(add), how), verdict(add < 1024)})
	} else {
		notMeasured("WAL added by 100 idle queues at 100 Hz", "< 1 KiB/s")
	}
	return out
}

func markdown(r *Results, chartErrs []string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# bench/sub-second — %s profile\n\n", r.Profile)
	w("Run %s → %s", r.Started.Format("2006-01-02 15:04:05 MST"), r.Finished.Format("15:04:05"))
	if r.Interrupted {
		w(" (**interrupted**: the phases below are the ones that finished)")
	}
	w(".\n\n## Machine\n\n")
	m := r.Machine
	w("| | |\n|---|---|\n")
	w("| CPUs (nproc) | %d × %s |\n| memory | %s |\n| kernel | %s |\n", m.CPUs, m.CPUModel, human(float64(m.MemoryBytes)), m.Kernel)
	w("| PostgreSQL | %s (its own cluster, durable commits, settings below) |\n", m.PostgreSQL)
	w("| pg_cron | extension %s (Debian postgresql-15-cron 1.4.2) |\n| PgQ | extension %s, pgqd %s |\n", m.PgCron, m.PgQ, m.Pgqd)
	w("| pgque engine | %s |\n| Go | %s |\n\n", m.Engine, m.Go)
	w("Cluster settings: ")
	for k, v := range r.Config.ClusterSettings {
		w("`%s=%s` ", k, v)
	}
	w("\nConsumer poll interval %.1f ms (poll-only), LISTEN fallback poll %.0f ms; producer ≤ %d transactions/s (events batched into them); samples every %.0f ms.\n\n",
		r.Config.PollIntervalMs, r.Config.ListenFallbackMs, r.Config.ProducerTxPerSec, r.Config.SampleEveryMs)

	w("## Targets (DESIGN.md)\n\n| target | goal | measured | verdict |\n|---|---|---|---|\n")
	for _, t := range targets(r) {
		w("| %s | %s | %s | %s |\n", t.what, t.goal, t.measured, t.verdict)
	}
	if h, ok := r.find(headline(SystemPgQ)); ok {
		w("\nBaseline, upstream PgQ + pgqd on the headline cell (%s): p50 %s, p99 %s, max %s ms; peak dead tuples tick %d, subscription %d, queue %d.\n",
			h.Name, f1(h.Latency.P50), f1(h.Latency.P99), f1(h.Latency.Max), h.PeakDeadTick, h.PeakDeadSub, h.PeakDeadQueue)
	}
	hi, ok1 := r.find(cell(SystemPgQ, 100, 800, false, 1))
	lo, ok2 := r.find(cell(SystemPgQ, 1, 800, false, 1))
	if ok1 && ok2 && lo.WALBytesPerSec > 0 {
		w("PgQ + pgqd WAL 100 Hz / 1 Hz at 800 ev/s: %.2f×.\n", hi.WALBytesPerSec/lo.WALBytesPerSec)
	}
	if idle, ok := r.find(cell(SystemPgQ, 100, 0, false, 100)); ok {
		w("PgQ + pgqd, 100 idle queues at 100 Hz: %s/s of WAL in total.\n", human(idle.WALBytesPerSec))
	}

	if r.WALPerTick > 0 {
		w("\nWAL per materialized tick of one active queue (probe before pg_cron starts: N × (send; tick) − N × send, over N): **%.0f bytes** (pgquectl tick projects WAL/day with ticker.BytesPerTick).\n", r.WALPerTick)
	}
	w("\n## Phases\n\nLatency: producer commit (client clock after COMMIT returned) → consumer receive (client clock after receive returned), same machine, same clock.\n\n")
	w("| phase | system | Hz | ev/s | xmin | wake | rotation | s | events | p50 | p95 | p99 | p99.9 | max ms | WAL/s | dead tick | dead sub | dead queue | dead event | max tick gap ms | handover gap ms | cron runs | backends | notify | bystander p99 ms | peak CPU / I/O pressure |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Phases {
		rate := fmt.Sprint(p.Rate)
		if p.Rate == 0 {
			rate = fmt.Sprintf("idle (%d q)", p.Queues)
		}
		w("| %s | %s | %d | %s | %s | %s | %s | %.0f | %d/%d | %s | %s | %s | %s | %s | %s | %d | %d | %d | %d | %s | %s | %d→%d | %d | %.5f | %s | %.0f%% / %.0f%% |\n",
			p.Name, p.System, p.Hz, rate, yes(p.HeldXmin), p.Wake, p.RotationLabel(), p.Seconds,
			p.Consumed, p.Produced, f1(p.Latency.P50), f1(p.Latency.P95), f1(p.Latency.P99), f1(p.Latency.P999), f1(p.Latency.Max),
			human(p.WALBytesPerSec), p.PeakDeadTick, p.PeakDeadSub, p.PeakDeadQueue, p.PeakDeadEvent,
			f1(p.MaxTickGapMs), f1(p.MaxHandoverGapMs), p.CronRunsStart, p.CronRunsEnd, p.BackendsPeak, p.NotifyUsagePeak, f1(p.Bystander.P99),
			100*p.PeakCPUStall, 100*p.PeakIOStall)
	}
	var problems []string
	for _, p := range r.Phases {
		if p.Missing > 0 || p.Dups > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d events committed but not received by the end of the drain, %d received twice", p.Name, p.Missing, p.Dups))
		}
		for _, e := range p.Errors {
			problems = append(problems, p.Name+": "+e)
		}
	}
	if len(problems) > 0 {
		w("\n### Problems seen\n\n")
		for _, s := range problems {
			w("- %s\n", s)
		}
	}
	if h, ok := r.find(headline(SystemPgque)); ok && len(h.TopGaps) > 0 {
		w("\n### Largest tick gaps of %s\n\n| tick at | gap ms | seconds after the minute (pg_cron 1.4 slot boundary) | CPU pressure that second | I/O pressure that second |\n|---|---|---|---|---|\n", h.Name)
		for _, g := range h.TopGaps {
			cpu, io := pressureAt(h, g.At)
			w("| %s | %.1f | %.3f | %.0f%% | %.0f%% |\n", g.At.UTC().Format("15:04:05.000"), g.Ms, g.At.Sub(g.At.Truncate(time.Minute)).Seconds(), 100*cpu, 100*io)
		}
	}
	var slow []PhaseResult
	for _, p := range r.Phases {
		if p.System == SystemPgque && (p.Latency.Max > 60 || p.LockWaitsCount > 0) {
			slow = append(slow, p)
		}
	}
	if len(slow) > 0 {
		w("\n### Tails: the slowest events and the lock waits the server logged (≥ 100 ms)\n")
		for _, p := range slow {
			w("\n**%s**: slowest events committed at", p.Name)
			for i, e := range p.WorstEvents {
				if i == 5 {
					break
				}
				w(" %s (%.0f ms)", e.At.UTC().Format("15:04:05.000"), e.Ms)
			}
			w("; %d lock waits logged.\n", p.LockWaitsCount)
			for _, l := range p.LockWaits {
				w("\n    %s", l)
			}
			if len(p.LockWaits) > 0 {
				w("\n")
			}
		}
	}
	var walPhases []PhaseResult
	for _, p := range r.Phases {
		if len(p.WALBreakdown) > 0 && (p.Rate == 800 || p.Rate == 0) && !p.HeldXmin && p.WALSeconds > 0 {
			walPhases = append(walPhases, p)
		}
	}
	if len(walPhases) > 0 {
		w("\n### Where the WAL goes (800 ev/s and idle, no xmin held; pg_walinspect, bytes/s by record type)\n")
		for _, p := range walPhases {
			w("\n**%s** — %s/s in all:\n\n| record | records/s | bytes/s | of which FPI |\n|---|---|---|---|\n", p.Name, human(p.WALBytesPerSec))
			for _, st := range p.WALBreakdown {
				w("| %s | %.0f | %s | %s |\n", st.Record, float64(st.Count)/p.WALSeconds, human(float64(st.Total)/p.WALSeconds), human(float64(st.FPIBytes)/p.WALSeconds))
			}
		}
	}
	w("\n## Charts\n\n![latency CDF](%s)\n\n![dead tuples](%s)\n", fileCDF, fileDeadTuple)
	for _, e := range chartErrs {
		w("\nChart error: %s\n", e)
	}
	w("\nRaw data: [%s](%s).\n", fileJSON, fileJSON)
	return b.String()
}

// pressureAt returns the machine's CPU and I/O pressure (PSI "some") of the
// sample interval that covers at.
func pressureAt(p PhaseResult, at time.Time) (cpu, io float64) {
	t := at.Sub(p.Started).Seconds()
	for _, s := range p.Samples {
		if s.T >= t {
			return s.CPUStall, s.IOStall
		}
	}
	return 0, 0
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

func yes(b bool) string {
	if b {
		return "held"
	}
	return "—"
}

func human(v float64) string {
	switch {
	case v >= 1<<30:
		return fmt.Sprintf("%.1f GiB", v/(1<<30))
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10 || v <= -(1<<10):
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}
