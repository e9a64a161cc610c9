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
		return p.System == system && p.Hz == 100 && p.Rate == 800 && p.HeldXmin && p.Wake == WakePoll && p.Rotation == 0 &&
			plain(p)
	}
}

// plain: the main cluster, paced arrivals, one consumer (the default axes).
func plain(p PhaseResult) bool {
	return p.Cron == CronMain && p.Arrivals == ArrivalsPaced && p.Consumers <= 1
}

// cron16Cell matches a phase on the pg_cron 1.6 cluster.
func cron16Cell(system string, rate int, arrivals string) func(PhaseResult) bool {
	return func(p PhaseResult) bool {
		return p.System == system && p.Cron == Cron16 && p.Hz == 100 && p.Rate == rate && p.Arrivals == arrivals &&
			p.HeldXmin && p.Wake == WakePoll && p.Consumers <= 1
	}
}

func cell(system string, hz, rate int, xmin bool, queues int) func(PhaseResult) bool {
	return func(p PhaseResult) bool {
		return p.System == system && p.Hz == hz && p.Rate == rate && p.HeldXmin == xmin && p.Wake == WakePoll &&
			p.Rotation == 0 && (rate > 0 || p.Queues == queues) && plain(p)
	}
}

type target struct {
	what, goal, measured, verdict string
}

// invalid: events committed during the phase were still undelivered when
// the drain ended - the consumer fell behind (or lost events), so its
// latency percentiles describe only what it got to and are not a result.
func invalid(p PhaseResult) bool { return p.Missing > 0 }

// latf prints a latency, or "invalid" for a phase whose consumer fell behind.
func latf(p PhaseResult, v float64) string {
	if invalid(p) {
		return fmt.Sprintf("invalid (%d undelivered)", p.Missing)
	}
	return f1(v)
}

// latms is latf with the unit.
func latms(p PhaseResult, v float64) string {
	if invalid(p) {
		return latf(p, v)
	}
	return f1(v) + " ms"
}

// lverdict judges a latency target; a phase whose consumer fell behind has
// no latency to judge.
func lverdict(p PhaseResult, ok bool) string {
	if invalid(p) {
		return "**INVALID**: events undelivered at the end of the drain"
	}
	return verdict(ok)
}

// missNote attributes a missed latency maximum to the cause measured for
// the tick gap its slowest event waited in (stall diagnostics; missCause);
// "" when met.
func missNote(p PhaseResult, ok bool) string {
	c := missCause(p)
	if ok || invalid(p) || c == "" {
		return ""
	}
	return " (" + c + ")"
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
			target{"latency p50, 100 Hz, 800 ev/s, xmin held, poll-only (" + h.Name + ")", "≤ 8 ms", latms(h, l.P50), lverdict(h, l.P50 <= 8)},
			target{"latency p99, same", "≤ 25 ms", latms(h, l.P99), lverdict(h, l.P99 <= 25)},
			target{"latency max, same (over " + h.Duration.String() + ")", "≤ 60 ms", latms(h, l.Max) + missNote(h, l.Max <= 60), lverdict(h, l.Max <= 60)},
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
			target{"latency p50 at 10 Hz (" + t.Name + ")", "≤ 55 ms", latms(t, t.Latency.P50), lverdict(t, t.Latency.P50 <= 55)},
			target{"latency p99 at 10 Hz", "≤ 105 ms", latms(t, t.Latency.P99), lverdict(t, t.Latency.P99 <= 105)})
	}
	hi, ok1 := r.find(cell(SystemPgque, 100, 800, false, 1))
	lo, ok2 := r.find(cell(SystemPgque, 1, 800, false, 1))
	if ok1 && ok2 && lo.WALBytesPerSec > 0 {
		ratio := hi.WALBytesPerSec / lo.WALBytesPerSec
		out = append(out, target{"WAL 100 Hz / WAL 1 Hz at 800 ev/s", "≤ 1.2×",
			fmt.Sprintf("%.2f× (%s/s vs %s/s over the production seconds, drain included; per event produced %s vs %s)", ratio,
				human(hi.WALBytesPerSec), human(lo.WALBytesPerSec), perEvent(hi), perEvent(lo)), verdict(ratio <= 1.2)})
	} else {
		notMeasured("WAL 100 Hz / WAL 1 Hz at 800 ev/s", "≤ 1.2×")
	}
	idle, ok1 := r.find(cell(SystemPgque, 100, 0, false, 100))
	// The baseline: ticking at 100 Hz with no (or one) idle queue.
	none, ok2 := r.find(func(p PhaseResult) bool {
		return p.System == SystemPgque && p.Hz == 100 && p.Rate == 0 && p.Queues <= 1 && plain(p)
	})
	if ok1 {
		// Judged on WAL record bytes (pg_walinspect): full-page images
		// depend on where the last checkpoint fell, not on the queues; each
		// phase starts right after a CHECKPOINT and the FPI share is shown.
		add := idle.WALRecordBytesPerSec
		how := fmt.Sprintf("record bytes without full-page images; total %s/s incl. %s/s FPI; %d checkpoint(s) in the phase; no 0-queue phase to subtract",
			human(idle.WALBytesPerSec), human(idle.WALFPIBytesPerSec), idle.Checkpoints)
		if ok2 {
			add -= none.WALRecordBytesPerSec
			how = fmt.Sprintf("measured after a settle (2 s of first ticks, ANALYZE, VACUUM, CHECKPOINT, 5 s); record bytes without full-page images: %s/s with 100 idle queues − %s/s with %d (%s); totals incl. FPI %s/s vs %s/s; checkpoints in the phases %d / %d; negative = below the noise",
				human(idle.WALRecordBytesPerSec), human(none.WALRecordBytesPerSec), none.Queues, none.Name,
				human(idle.WALBytesPerSec), human(none.WALBytesPerSec), idle.Checkpoints, none.Checkpoints)
		}
		out = append(out, target{"WAL added by 100 idle queues at 100 Hz", "< 1 KiB/s",
			fmt.Sprintf("%s/s (%s)", human(add), how), verdict(add < 1024)})
	} else {
		notMeasured("WAL added by 100 idle queues at 100 Hz", "< 1 KiB/s")
	}
	if c, ok := r.find(func(p PhaseResult) bool { return p.System == SystemPgque && p.Consumers >= 16 && p.HeldXmin }); ok {
		out = append(out,
			target{fmt.Sprintf("peak dead tuples, tick tables, %d consumers polling every %.0f ms, xmin held (%s)", c.Consumers, r.Config.PollIntervalMs, c.Name), "≤ 200", fmt.Sprint(c.PeakDeadTick), verdict(c.PeakDeadTick <= 200)},
			target{"peak dead tuples, subscription tables, same", "≤ 500", fmt.Sprint(c.PeakDeadSub), verdict(c.PeakDeadSub <= 500)},
			target{"dead tuples, event tables, same", "0", fmt.Sprint(c.PeakDeadEvent), verdict(c.PeakDeadEvent == 0)})
	} else {
		notMeasured("dead tuples with 16 consumers and a held xmin", "tick ≤ 200, subscription ≤ 500, event 0")
	}
	if h, ok := r.find(cron16Cell(SystemPgque, 800, ArrivalsPaced)); ok {
		l := h.Latency
		out = append(out,
			target{"pg_cron 1.6: latency p50, headline cell (" + h.Name + ")", "≤ 8 ms", latms(h, l.P50), lverdict(h, l.P50 <= 8)},
			target{"pg_cron 1.6: latency p99, same", "≤ 15 ms", latms(h, l.P99), lverdict(h, l.P99 <= 15)},
			target{"pg_cron 1.6: latency max, same (over " + h.Duration.String() + ")", "≤ 60 ms", latms(h, l.Max) + missNote(h, l.Max <= 60), lverdict(h, l.Max <= 60)},
			target{fmt.Sprintf("pg_cron 1.6: largest tick gap at a slot handover (%d handovers)", h.Handovers), "≤ 30 ms", f1(h.MaxHandoverGapMs) + " ms", verdict(h.MaxHandoverGapMs <= 30)})
	} else {
		notMeasured("pg_cron 1.6 headline cell", "p50 ≤ 8, p99 ≤ 15, max ≤ 60 ms, handover ≤ 30 ms")
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
	if m.PgCron16 != "" {
		w("| pg_cron 1.6 cluster | extension %s (built from source; same PostgreSQL, same settings, pg_cron in the peer's database) |\n", m.PgCron16)
	}
	if m.PgQue020 != "" {
		w("| PgQue 0.2.0 | pgque.sql sha256 %s… |\n", m.PgQue020)
	}
	w("| pgque engine | %s |\n| Go | %s |\n\n", m.Engine, m.Go)
	w("Cluster settings: ")
	for k, v := range r.Config.ClusterSettings {
		w("`%s=%s` ", k, v)
	}
	w("\nConsumer poll interval %.1f ms (poll-only), LISTEN fallback poll %.0f ms; producer ≤ %d transactions/s (events batched into them); samples every %.0f ms.\n\n",
		r.Config.PollIntervalMs, r.Config.ListenFallbackMs, r.Config.ProducerTxPerSec, r.Config.SampleEveryMs)

	if len(r.Skipped) > 0 {
		w("**Skipped phases**:\n\n")
		for _, s := range r.Skipped {
			w("- %s\n", s)
		}
		w("\n")
	}
	w("## Targets (DESIGN.md)\n\n| target | goal | measured | verdict |\n|---|---|---|---|\n")
	for _, t := range targets(r) {
		w("| %s | %s | %s | %s |\n", t.what, t.goal, t.measured, t.verdict)
	}
	if h, ok := r.find(headline(SystemPgQ)); ok {
		w("\nBaseline, upstream PgQ + pgqd on the headline cell (%s): p50 %s, p99 %s, max %s ms; peak dead tuples tick %d, subscription %d, queue %d.\n",
			h.Name, latf(h, h.Latency.P50), latf(h, h.Latency.P99), latf(h, h.Latency.Max), h.PeakDeadTick, h.PeakDeadSub, h.PeakDeadQueue)
	}
	hi, ok1 := r.find(cell(SystemPgQ, 100, 800, false, 1))
	lo, ok2 := r.find(cell(SystemPgQ, 1, 800, false, 1))
	switch {
	case ok1 && ok2 && (invalid(hi) || invalid(lo)):
		// A consumer that fell behind leaves the ticks' batches unread
		// and the acks unwritten: its WAL is not that of the same work.
		w("PgQ + pgqd WAL 100 Hz / 1 Hz at 800 ev/s: not comparable (%d and %d events undelivered at 100 Hz and 1 Hz).\n", hi.Missing, lo.Missing)
	case ok1 && ok2 && lo.WALBytesPerSec > 0:
		w("PgQ + pgqd WAL 100 Hz / 1 Hz at 800 ev/s: %.2f×.\n", hi.WALBytesPerSec/lo.WALBytesPerSec)
	}
	if idle, ok := r.find(cell(SystemPgQ, 100, 0, false, 100)); ok {
		w("PgQ + pgqd, 100 idle queues at 100 Hz: %s/s of WAL in total.\n", human(idle.WALBytesPerSec))
	}

	cron16Section(w, r)
	if r.WALPerTick > 0 {
		w("\nWAL per materialized tick of one active queue (probe before pg_cron starts: N × (send; tick) − N × send, over N): **%.0f bytes** (pgquectl tick projects WAL/day with ticker.BytesPerTick).\n", r.WALPerTick)
	}
	w("\n## Phases\n\nLatency: producer commit (client clock after COMMIT returned) → consumer receive (client clock once the receive returned its rows, before the ack), same machine, same clock.\n\n")
	w("| phase | system | Hz | ev/s | xmin | wake | rotation | s | events | p50 | p95 | p99 | p99.9 | max ms | WAL/s | dead tick | dead sub | dead queue | dead event | max tick gap ms | handover gap ms | cron runs | backends | notify | bystander p99 ms | peak CPU / I/O pressure |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Phases {
		rate := fmt.Sprint(p.Rate)
		if p.Rate == 0 {
			rate = fmt.Sprintf("idle (%d q)", p.Queues)
		}
		w("| %s | %s | %d | %s | %s | %s | %s | %.0f | %d/%d | %s | %s | %s | %s | %s | %s | %d | %d | %d | %d | %s | %s | %d→%d | %d | %.5f | %s | %.0f%% / %.0f%% |\n",
			p.Name, systemLabel(p), p.Hz, rate, yes(p.HeldXmin), p.Wake, p.RotationLabel(), p.Seconds,
			p.Consumed, p.Produced, latf(p, p.Latency.P50), latf(p, p.Latency.P95), latf(p, p.Latency.P99), latf(p, p.Latency.P999), latf(p, p.Latency.Max),
			human(p.WALBytesPerSec), p.PeakDeadTick, p.PeakDeadSub, p.PeakDeadQueue, p.PeakDeadEvent,
			f1(p.MaxTickGapMs), f1(p.MaxHandoverGapMs), p.CronRunsStart, p.CronRunsEnd, p.BackendsPeak, p.NotifyUsagePeak, f1(p.Bystander.P99),
			100*p.PeakCPUStall, 100*p.PeakIOStall)
	}
	var splits []string
	for _, p := range r.Phases {
		if s := p.Split; s != nil && p.Missing == 0 {
			ack := "—"
			if p.Ack.Count > 0 {
				ack = fmt.Sprintf("%.2f / %.2f", p.Ack.P50, p.Ack.P99)
			}
			splits = append(splits, fmt.Sprintf("| %s | %.1f | %.2f / %.2f | %.2f / %.2f / %.2f | %s | %d |", p.Name, s.TickIntervalMs, s.WaitP50, s.WaitMean, s.AfterTickP50, s.AfterTickMean, s.AfterTickP99, ack, s.Events))
		}
	}
	if len(splits) > 0 {
		w("\n### Where the latency goes\n\n")
		w("Each event's latency divided at the first tick of its queue whose `tick_time` (the tick transaction's start; same machine clock) is at or after the event's commit: the wait for that tick (uniform over a tick interval: half of it on average), and the rest - the tick's own work and COMMIT, the consumer's poll interval, its receive. The consumer's ack after the receive is not part of the latency (its own column: receive returned → ack returned).\n\n")
		w("| phase | mean tick interval ms | wait for the tick p50 / mean ms | tick → receive p50 / mean / p99 ms | ack p50 / p99 ms | events |\n|---|---|---|---|---|---|\n")
		for _, s := range splits {
			w("%s\n", s)
		}
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
	stallSection(w, r)
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
		if len(p.WALBreakdown) > 0 && (p.Rate == 800 || p.Rate == 0) && !p.HeldXmin && p.Seconds > 0 {
			walPhases = append(walPhases, p)
		}
	}
	if len(walPhases) > 0 {
		w("\n### Where the WAL goes (800 ev/s and idle, no xmin held; pg_walinspect, bytes/s by record type)\n")
		for _, p := range walPhases {
			w("\n**%s** — %s/s in all:\n\n| record | records/s | bytes/s | of which FPI |\n|---|---|---|---|\n", p.Name, human(p.WALBytesPerSec))
			for _, st := range p.WALBreakdown {
				w("| %s | %.0f | %s | %s |\n", st.Record, float64(st.Count)/p.Seconds, human(float64(st.Total)/p.Seconds), human(float64(st.FPIBytes)/p.Seconds))
			}
			if len(p.WALByRelation) > 0 {
				w("\nBy relation (pg_get_wal_records_info; largest record bytes without FPI first, top 20):\n\n| record on relation | records/s | bytes/s without FPI | FPI bytes/s |\n|---|---|---|---|\n")
				for _, st := range p.WALByRelation {
					w("| %s | %.2f | %s | %s |\n", st.Record, float64(st.Count)/p.Seconds, human(float64(st.Bytes)/p.Seconds), human(float64(st.FPIBytes)/p.Seconds))
				}
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

// systemLabel names the system with the axes the phases table has no
// column for (cluster, arrivals, consumers).
func systemLabel(p PhaseResult) string {
	l := p.System
	if p.Cron == Cron16 {
		l += " · pg_cron 1.6"
	}
	if p.Arrivals == ArrivalsPoisson {
		l += " · Poisson"
	}
	if p.Consumers > 1 {
		l += fmt.Sprintf(" · %d consumers", p.Consumers)
	}
	return l
}

// cron16Section: the managed-provider comparison, PgQue 0.2.0 and
// pgquectl on pg_cron 1.6, same cell, same run.
func cron16Section(w func(string, ...any), r *Results) {
	var rows []PhaseResult
	for _, p := range r.Phases {
		if p.Cron == Cron16 {
			rows = append(rows, p)
		}
	}
	if len(rows) == 0 {
		return
	}
	w("\n### pg_cron 1.6 (the managed-provider path): PgQue 0.2.0 and pgquectl side by side\n\n")
	w("Same cluster, same run, one after the other; each system's own pg_cron jobs tick only during its phases. PgQue 0.2.0 ticks as its README says (`set_tick_period_ms(%d)`, `start()`: a `'1 second'` job running its `ticker_loop`), with `ticker_max_lag` set to the period (as for PgQ).\n\n", 10)
	w("| phase | system | ev/s | p50 | p99 | max ms | max tick gap ms | handover gap ms (handovers) | stalls > 50 ms | dead tick | dead sub | dead event |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range rows {
		w("| %s | %s | %d | %s | %s | %s | %s | %s (%d) | %d | %d | %d | %d |\n", p.Name, systemLabel(p), p.Rate,
			latf(p, p.Latency.P50), latf(p, p.Latency.P99), latf(p, p.Latency.Max), f1(p.MaxTickGapMs), f1(p.MaxHandoverGapMs), p.Handovers,
			len(p.Stalls), p.PeakDeadTick, p.PeakDeadSub, p.PeakDeadEvent)
	}
}

// stallSection: every tick gap over 50 ms (the largest per phase) with
// what the machine and the server did meanwhile.
func stallSection(w func(string, ...any), r *Results) {
	found := false
	for _, p := range r.Phases {
		if len(p.Stalls) > 0 {
			found = true
		}
	}
	w("\n### Stall diagnostics: tick gaps over 50 ms\n\n")
	if !found {
		w("No tick gap over 50 ms in any phase.\n")
		return
	}
	w("Per gap: whether a pg_cron run of the ticker started or ended in it (handover), the machine's CPU and I/O pressure over the gap (PSI `some`, sampled every 100 ms: the share of the time some task waited), checkpoints in progress (server log, `log_checkpoints`), what the server logged meanwhile (the loop's round debug log where the engine has `ticker_debug_round_ms`, lock waits, warnings), and where the ticker backend's time went (sampled every 20 ms: time on a CPU and time runnable but waiting for one from /proc/<pid>/schedstat, its wait events from pg_stat_activity - `none` is on a CPU or runnable - and the machine's steal time from /proc/stat; the rest of the gap the backend was blocked or asleep).\n")
	for _, p := range r.Phases {
		if len(p.Stalls) == 0 {
			continue
		}
		w("\n**%s** (%s): %d gap(s) over 50 ms (largest %d shown)\n\n| from | gap ms | cause | handover | CPU | I/O | checkpoint | server log | ticker backend |\n|---|---|---|---|---|---|---|---|---|\n",
			p.Name, systemLabel(p), len(p.Stalls), min(len(p.Stalls), maxStalls))
		for _, s := range p.Stalls {
			cp := "—"
			if len(s.Checkpoint) > 0 {
				cp = mdCell(strings.Join(s.Checkpoint, " / "))
			}
			lg := "—"
			if len(s.ServerLog) > 0 {
				lg = mdCell(strings.Join(s.ServerLog, " / "))
			}
			w("| %s | %.1f | %s | %s | %.0f%% | %.0f%% | %s | %s | %s |\n", s.From.UTC().Format("15:04:05.000"), s.Ms, mdCell(stallCause(s)), yesNo(s.Handover),
				100*s.CPUPressure, 100*s.IOPressure, cp, lg, mdCell(procText(s)))
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// mdCell makes s safe inside a markdown table cell.
func mdCell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }

// perEvent: a phase's WAL bytes per event produced ("—" without events).
func perEvent(p PhaseResult) string {
	if p.Produced == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f B", float64(p.WALBytes)/float64(p.Produced))
}
