package main

import (
	"cmp"
	"context"
	"os"
	"slices"
	"strings"
	"time"
)

// Stall diagnostics: for each tick gap over stallThreshold, what happened
// then — the machine's CPU and I/O pressure during the gap (PSI sampled
// every psiEvery), checkpoints in progress (server log, log_checkpoints),
// and the server's log lines inside the gap (the loop's per-round debug
// log where the engine has ticker_debug_round_ms, lock waits, warnings).

const (
	stallThreshold = 50 * time.Millisecond
	psiEvery       = 100 * time.Millisecond
	maxStalls      = 25 // largest gaps kept per phase
	maxStallLines  = 6
)

// Stall is one tick gap over stallThreshold and what the machine and the
// server were doing meanwhile.
type Stall struct {
	From time.Time `json:"from"` // the tick before the gap
	To   time.Time `json:"to"`   // the tick that ended it
	Ms   float64   `json:"ms"`
	// Handover: a pg_cron run of the ticker started or ended in the gap.
	Handover bool `json:"handover"`
	// CPU / I/O pressure (PSI "some": share of the time some task waited)
	// over the gap, from the 100 ms samples around it.
	CPUPressure float64 `json:"cpu_pressure"`
	IOPressure  float64 `json:"io_pressure"`
	// Checkpoint: a checkpoint was in progress during the gap (its log lines).
	Checkpoint []string `json:"checkpoint,omitempty"`
	// ServerLog: server log lines logged during the gap (± 100 ms).
	ServerLog []string `json:"server_log,omitempty"`
	// Ticker: where each ticker backend's time went over the gap (on a
	// CPU, runnable waiting for one, wait events sampled), and StealMs the
	// machine's steal time over it (-1: unknown); procsample.go.
	Ticker  []ProcSplit `json:"ticker,omitempty"`
	StealMs float64     `json:"steal_ms"`
}

// psiPoint is one reading of the cumulative PSI counters (µs).
type psiPoint struct {
	at      time.Time
	cpu, io int64
}

// psiSampler reads /proc/pressure/{cpu,io} every psiEvery until ctx ends.
func psiSampler(ctx context.Context) []psiPoint {
	var out []psiPoint
	t := time.NewTicker(psiEvery)
	defer t.Stop()
	for {
		cpu, ok1 := psiTotal("cpu")
		io, ok2 := psiTotal("io")
		if !ok1 || !ok2 {
			return nil // no PSI on this kernel
		}
		out = append(out, psiPoint{time.Now(), cpu, io})
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

// pressureOver returns the PSI shares over [from, to], widened to the
// samples that bracket it.
func pressureOver(ps []psiPoint, from, to time.Time) (cpu, io float64) {
	i, j, ok := bracket(len(ps), func(k int) time.Time { return ps[k].at }, from, to)
	if !ok {
		return 0, 0
	}
	us := float64(ps[j].at.Sub(ps[i].at).Microseconds())
	if us <= 0 {
		return 0, 0
	}
	return float64(ps[j].cpu-ps[i].cpu) / us, float64(ps[j].io-ps[i].io) / us
}

// bracket finds, among n samples taken at at(0) < at(1) < ..., the last
// one at or before from (i; the first when none is) and the first one at
// or after to (j; the last when none is): the samples that bracket
// [from, to]. ok is false with fewer than two samples.
func bracket(n int, at func(int) time.Time, from, to time.Time) (i, j int, ok bool) {
	if n < 2 {
		return 0, 0, false
	}
	for i+1 < n && !at(i+1).After(from) {
		i++
	}
	j = i + 1
	for j < n-1 && at(j).Before(to) {
		j++
	}
	return i, j, j < n
}

// logLine is one server log line with its time.
type logLine struct {
	at   time.Time
	text string
}

// serverLog reads the log lines stamped between from and to (the prefix
// is '%m [%p] ...': "2006-01-02 15:04:05.000 UTC").
func serverLog(path string, from, to time.Time) []logLine {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []logLine
	for l := range strings.SplitSeq(string(raw), "\n") {
		if len(l) < 27 {
			continue
		}
		at, err := time.Parse("2006-01-02 15:04:05.000 MST", l[:27])
		if err != nil || at.Before(from) || at.After(to) {
			continue
		}
		out = append(out, logLine{at, strings.TrimSpace(l)})
	}
	return out
}

// span is a time interval (a checkpoint, a pg_cron run).
type span struct{ from, to time.Time }

// checkpoints pairs "checkpoint starting" with the next "checkpoint
// complete" line; a checkpoint still running at the end lasts to the end.
func checkpoints(lines []logLine, end time.Time) (spans []span, text [][2]string) {
	var open *logLine
	for i, l := range lines {
		switch {
		case strings.Contains(l.text, "checkpoint starting"):
			open = &lines[i]
		case strings.Contains(l.text, "checkpoint complete") && open != nil:
			spans = append(spans, span{open.at, l.at})
			text = append(text, [2]string{open.text, l.text})
			open = nil
		}
	}
	if open != nil {
		spans = append(spans, span{open.at, end})
		text = append(text, [2]string{open.text, "(still running at the end of the phase)"})
	}
	return spans, text
}

// stalls lists the tick gaps over stallThreshold (largest first, at most
// maxStalls) with their diagnostics.
func stalls(ticks []time.Time, from, to time.Time, psi []psiPoint, procs []procPoint, logPath string, runs []span) []Stall {
	var out []Stall
	for i := 1; i < len(ticks); i++ {
		a, b := ticks[i-1], ticks[i]
		if a.Before(from) || b.After(to) || b.Sub(a) <= stallThreshold {
			continue
		}
		out = append(out, Stall{From: a, To: b, Ms: float64(b.Sub(a).Microseconds()) / 1000, Handover: inAny(runs, a, b)})
	}
	slices.SortFunc(out, func(x, y Stall) int { return cmp.Compare(y.Ms, x.Ms) })
	out = out[:min(len(out), maxStalls)]
	if len(out) == 0 {
		return nil
	}
	var lines []logLine
	if logPath != "" {
		lines = serverLog(logPath, from.Add(-time.Hour), to.Add(time.Second))
	}
	cps, cpText := checkpoints(lines, to)
	for i := range out {
		s := &out[i]
		s.CPUPressure, s.IOPressure = pressureOver(psi, s.From, s.To)
		s.Ticker, s.StealMs = procOver(procs, s.From, s.To)
		for k, c := range cps {
			if !c.from.After(s.To) && !c.to.Before(s.From) {
				s.Checkpoint = append(s.Checkpoint, cpText[k][0], cpText[k][1])
			}
		}
		for _, l := range lines {
			if l.at.After(s.From.Add(-100*time.Millisecond)) && l.at.Before(s.To.Add(100*time.Millisecond)) &&
				!strings.Contains(l.text, "checkpoint ") && len(s.ServerLog) < maxStallLines {
				s.ServerLog = append(s.ServerLog, clipLine(l.text, 300))
			}
		}
	}
	return out
}

// inAny says whether a run of the ticker started or ended within [a, b].
func inAny(runs []span, a, b time.Time) bool {
	for _, r := range runs {
		if (!r.from.Before(a) && !r.from.After(b)) || (!r.to.IsZero() && !r.to.Before(a) && !r.to.After(b)) {
			return true
		}
	}
	return false
}

func clipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
