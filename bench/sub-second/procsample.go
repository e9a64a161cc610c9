package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Where a stalled ticker's time went. Every procEvery the sampler reads,
// for each backend running the system's ticker job, from the kernel its
// time on a CPU and its time runnable but waiting for one
// (/proc/<pid>/schedstat), and the machine's steal time (/proc/stat: time
// the hypervisor ran something else while one of our virtual CPUs had
// work); every waitEvery it also asks pg_stat_activity which backends run
// the ticker and what they wait on. A gap then splits into on-CPU,
// run-queue wait, stolen, and the rest (blocked: sleeping, I/O, locks),
// with the wait events seen - a cause measured, not guessed.
//
// The database is asked less often than /proc is read because the query
// is work on the measured server: at 50 a second it was ~1-2% of a core on
// the 2-core machine, beside the ticker whose tail it measures; reading
// /proc costs the server nothing.

const (
	procEvery = 20 * time.Millisecond
	waitEvery = 100 * time.Millisecond
)

// qTickerBackends: the backends running the ticker job's command.
const qTickerBackends = `SELECT pid, coalesce(wait_event_type || ':' || wait_event, '') FROM pg_catalog.pg_stat_activity
 WHERE datname = $1 AND query LIKE $2 AND state = 'active'`

// procPoint is one sample.
type procPoint struct {
	at    time.Time
	steal int64 // machine-wide, ns (sum over CPUs)
	procs []procSample
}

type procSample struct {
	pid        int
	run, queue int64 // cumulative ns (schedstat)
	ok         bool  // schedstat readable
	queried    bool  // wait is from pg_stat_activity (every waitEvery)
	wait       string
}

// ProcSplit is where a ticker backend's time went during a gap (ms).
type ProcSplit struct {
	Pid        int            `json:"pid"`
	OnCPUMs    float64        `json:"on_cpu_ms"`
	RunQueueMs float64        `json:"run_queue_ms"`
	WaitEvents map[string]int `json:"wait_events,omitempty"` // samples per wait event ("" = none: on a CPU or runnable)
	Samples    int            `json:"samples"`               // samples that read its wait event (pg_stat_activity)
}

// procSampler samples until ctx ends; nil when the system has no ticker
// job to find.
func procSampler(ctx context.Context, conn *pgx.Conn, sys system, rec *recorder) []procPoint {
	like := sys.TickerJobLike()
	if like == "" || conn == nil {
		return nil
	}
	var out []procPoint
	t := time.NewTicker(procEvery)
	defer t.Stop()
	failed := false
	var pids []int // the ticker backends as last queried
	var asked time.Time
	for {
		p := procPoint{at: time.Now(), steal: stealNs()}
		if p.at.Sub(asked) < waitEvery {
			for _, pid := range pids {
				s := procSample{pid: pid}
				s.run, s.queue, s.ok = schedstat(pid)
				p.procs = append(p.procs, s)
			}
		} else {
			asked = p.at
			pids = pids[:0]
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			rows, err := conn.Query(qctx, qTickerBackends, sys.DB(), like)
			if err == nil {
				for rows.Next() {
					s := procSample{queried: true}
					if rows.Scan(&s.pid, &s.wait) == nil {
						s.run, s.queue, s.ok = schedstat(s.pid)
						p.procs = append(p.procs, s)
						pids = append(pids, s.pid)
					}
				}
				err = rows.Err()
				rows.Close()
			}
			cancel()
			if err != nil && ctx.Err() == nil && !failed {
				rec.errorf("ticker backend sampler: %v", err)
				failed = true
			}
		}
		out = append(out, p)
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

// schedstat reads /proc/<pid>/schedstat: ns on a CPU, ns runnable waiting.
func schedstat(pid int) (run, queue int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, false
	}
	r, err1 := strconv.ParseInt(f[0], 10, 64)
	q, err2 := strconv.ParseInt(f[1], 10, 64)
	return r, q, err1 == nil && err2 == nil
}

// stealNs reads the machine's cumulative steal time (/proc/stat, first
// line, 8th value, in USER_HZ ticks of 10 ms) in ns; -1 when unreadable.
func stealNs() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	v, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		return -1
	}
	return v * int64(10*time.Millisecond)
}

// procOver splits [from, to] per ticker backend, from the samples that
// bracket it, and gives the machine's steal time over it (ms; -1 unknown).
func procOver(ps []procPoint, from, to time.Time) (splits []ProcSplit, stealMs float64) {
	stealMs = -1
	i, j, ok := bracket(len(ps), func(k int) time.Time { return ps[k].at }, from, to)
	if !ok {
		return nil, stealMs
	}
	if ps[i].steal >= 0 && ps[j].steal >= 0 {
		stealMs = float64(ps[j].steal-ps[i].steal) / 1e6
	}
	// Per pid: the first and last sample inside [i, j] that read schedstat.
	first := map[int]procSample{}
	last := map[int]procSample{}
	waits := map[int]map[string]int{}
	count := map[int]int{}
	for k := i; k <= j; k++ {
		for _, s := range ps[k].procs {
			if _, seen := first[s.pid]; !seen && s.ok {
				first[s.pid] = s
			}
			if s.ok {
				last[s.pid] = s
			}
			if !s.queried {
				continue
			}
			if waits[s.pid] == nil {
				waits[s.pid] = map[string]int{}
			}
			waits[s.pid][s.wait]++
			count[s.pid]++
		}
	}
	for pid, a := range first {
		b := last[pid]
		splits = append(splits, ProcSplit{
			Pid:        pid,
			OnCPUMs:    float64(b.run-a.run) / 1e6,
			RunQueueMs: float64(b.queue-a.queue) / 1e6,
			WaitEvents: waits[pid],
			Samples:    count[pid],
		})
	}
	slices.SortFunc(splits, func(x, y ProcSplit) int { return cmp.Compare(x.Pid, y.Pid) })
	return splits, stealMs
}

// procText renders a stall's split for the report.
func procText(s Stall) string {
	if len(s.Ticker) == 0 && s.StealMs <= 0 {
		return "—"
	}
	var parts []string
	for _, p := range s.Ticker {
		var ws []string
		keys := make([]string, 0, len(p.WaitEvents))
		for k := range p.WaitEvents {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			name := k
			if name == "" {
				name = "none"
			}
			ws = append(ws, fmt.Sprintf("%s×%d", name, p.WaitEvents[k]))
		}
		parts = append(parts, fmt.Sprintf("pid %d: on CPU %.1f ms, run queue %.1f ms, waits %s", p.Pid, p.OnCPUMs, p.RunQueueMs, strings.Join(ws, " ")))
	}
	if s.StealMs >= 0 {
		parts = append(parts, fmt.Sprintf("steal %.0f ms", s.StealMs))
	}
	return strings.Join(parts, "; ")
}

// stallCause names what a stall's measurements point at, in the order the
// evidence is strongest: time the hypervisor took, time the ticker backend
// waited for a CPU (run queue), a wait event it was seen blocked on, its
// own CPU work, or sleep between rounds (nothing was due: no new events
// committed). The schedstat and steal windows are the 20 ms samples that
// bracket the gap, so they can be up to 40 ms wider than it; wait events
// are read every 100 ms, so a gap of 50-100 ms has one or two.
func stallCause(s Stall) string {
	if len(s.Ticker) == 0 {
		return "not measured (no ticker backend sampled)"
	}
	p := s.Ticker[0]
	for _, q := range s.Ticker[1:] {
		if q.OnCPUMs+q.RunQueueMs > p.OnCPUMs+p.RunQueueMs {
			p = q
		}
	}
	gap := s.Ms
	sleep, top, topN := 0, "", 0
	for w, n := range p.WaitEvents {
		switch {
		case w == "Timeout:PgSleep":
			sleep += n
		case w != "" && (n > topN || n == topN && w < top):
			top, topN = w, n
		}
	}
	prefix := ""
	if s.Handover {
		prefix = "pg_cron handover; "
	}
	switch {
	case s.StealMs >= 0.3*gap:
		return fmt.Sprintf("%shypervisor steal: %.0f ms of the machine's CPU time taken by the host", prefix, s.StealMs)
	case p.RunQueueMs >= 0.4*gap:
		return fmt.Sprintf("%sCPU starvation: the ticker backend waited %.0f ms for a CPU (run queue), ran %.0f ms; machine CPU pressure %.0f%%",
			prefix, p.RunQueueMs, p.OnCPUMs, 100*s.CPUPressure)
	case topN >= 1 && 2*topN >= p.Samples:
		return fmt.Sprintf("%sblocked: the ticker backend was seen waiting on %s in %d of %d samples", prefix, top, topN, p.Samples)
	case p.OnCPUMs >= 0.4*gap:
		return fmt.Sprintf("%sthe ticker's own work: %.0f ms on a CPU (the round log names the phase)", prefix, p.OnCPUMs)
	case p.Samples > 0 && 2*sleep >= p.Samples:
		return fmt.Sprintf("%sthe ticker slept between rounds (%d of %d samples): nothing was due - no new event committed (I/O pressure %.0f%%)",
			prefix, sleep, p.Samples, 100*s.IOPressure)
	}
	return fmt.Sprintf("%sunattributed: on a CPU %.0f ms, run queue %.0f ms, %d samples", prefix, p.OnCPUMs, p.RunQueueMs, p.Samples)
}

// missCause names the cause of a phase's worst latency: the stall (tick
// gap) that was open when its slowest event committed - the event waited
// for the tick that ended it - else the largest stall ("" when the phase
// has none).
func missCause(p PhaseResult) string {
	if len(p.Stalls) == 0 {
		return ""
	}
	s, how := p.Stalls[0], "the largest tick gap" // largest first
	if len(p.WorstEvents) > 0 {
		at := p.WorstEvents[0].At
		for _, c := range p.Stalls {
			if !at.Before(c.From) && !at.After(c.To) {
				s, how = c, "the tick gap its slowest event waited in"
				break
			}
		}
	}
	return fmt.Sprintf("%s, %.0f ms at %s: %s", how, s.Ms, s.From.UTC().Format("15:04:05.000"), stallCause(s))
}
