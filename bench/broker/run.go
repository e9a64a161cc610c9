package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Run runs every cell of cfg.Params and writes results.json and report.md
// to cfg.OutDir. A cell that fails is recorded as failed and the run goes
// on; on ctx's end (first signal) the report of the cells done is written.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if cfg.Log == nil {
		return nil, errors.New("no logger")
	}
	if cfg.Ticker == "" {
		cfg.Ticker = TickerDaemon
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", cfg.OutDir, err)
	}
	res := &Results{Command: cfg.Command, Profile: cfg.Profile, Params: cfg.Params, ServeFlags: cfg.ServeFlags, Ticker: cfg.Ticker,
		TransactionIDs: cfg.TransactionIDs, StatementGroups: statementGroups, Started: time.Now().UTC(), Machine: machineFacts()}
	e, err := setupEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer e.close()
	res.HotlistSwitch = e.hotlist
	res.Settings = clusterSettings(e.cluster.CronPreloaded, cfg.StatementsTrack, cfg.ClusterSettings)
	_ = e.db.QueryRow(ctx, "SELECT version()").Scan(&res.Machine.PostgreSQL)

	if err := e.startTicker(ctx); err != nil {
		return nil, err
	}
	r := &runner{e: e, c: newClient(), p: cfg.Params, log: cfg.Log.Info, cells: cfg.Cells}
	defer r.c.close()
	r.runAll(ctx, res)

	res.Interrupted = ctx.Err() != nil
	res.Finished = time.Now().UTC()
	res.Machine.LoadEnd = loadAvg()
	res.BrokerLogLines = brokerWarnings(cfg.StateDir)
	for _, c := range res.Cells {
		if c.Status == StatusFailed {
			res.FailedCells++
		}
	}
	res.Targets = targets(res)
	if err := writeResults(cfg.OutDir, res); err != nil {
		return res, err
	}
	return res, nil
}

// runAll runs the cells in an order that restarts the brokers least:
// hot-list off, then on, then two brokers.
func (r *runner) runAll(ctx context.Context, res *Results) {
	p := r.p
	e := r.e
	on := "on"
	if !e.hotlist {
		on = "off"
	}
	add := func(c *Cell) *Cell { res.Cells = append(res.Cells, c); return c }
	run := func(c *Cell, f func() error) {
		add(c)
		if ctx.Err() != nil {
			c.Status, c.Error = StatusSkipped, "interrupted"
			return
		}
		if !r.selected(c.Name) {
			c.Status, c.Error = StatusSkipped, "not selected (--cells)"
			return
		}
		r.log("cell", "name", c.Name)
		if err := f(); err != nil {
			c.Status, c.Error = StatusFailed, err.Error()
			r.log("cell failed", "name", c.Name, "err", err)
			return
		}
		c.Status = StatusMeasured
		r.log("cell done", "name", c.Name, "summary", oneLine(c))
	}
	notAvail := func(c *Cell) { c.Status = StatusNotAvailable; add(c) }
	start := func(n int, hot bool) error {
		return e.startBrokers(ctx, n, hot)
	}

	// Hot-list off (the SQL candidate scan).
	if err := start(1, false); err != nil {
		add(&Cell{Name: "brokers", Status: StatusFailed, Error: err.Error()})
		return
	}
	url := func(i int) string { return e.brokers[i].url }
	latOff := &Cell{Name: "latency-off", Kind: "latency", Hotlist: "off", Brokers: 1, Partitions: p.LatencyPartitions, Consumers: p.LatencyConsumers}
	run(latOff, func() error { return r.latencyCell(ctx, latOff, url(0), url(0)) })
	seeded := map[int]bool{}
	for _, n := range p.HotPartitions {
		q := fmt.Sprintf("wild-%d", n)
		c := &Cell{Name: fmt.Sprintf("wildcard-%d-off", n), Kind: "wildcard", Hotlist: "off", Brokers: 1, Partitions: n}
		run(c, func() error {
			t0 := time.Now()
			if err := r.seedPartitions(ctx, url(0), q, n); err != nil {
				return err
			}
			seeded[n] = true
			c.Notes = append(c.Notes, fmt.Sprintf("seeding (one message per partition, popped) took %.1f s", time.Since(t0).Seconds()))
			return r.wildcardCell(ctx, c, url(0), q)
		})
	}
	manyOff := &Cell{Name: fmt.Sprintf("consumers-%d-off", p.ManyConsumers), Kind: "consumers", Hotlist: "off", Brokers: 1, Partitions: p.ManyPartitions}
	run(manyOff, func() error { return r.consumersCell(ctx, manyOff, url(0), "many-off") })

	// Hot-list on (the serve default), when this build has it.
	if e.hotlist {
		if err := start(1, true); err != nil {
			add(&Cell{Name: "brokers-hotlist", Status: StatusFailed, Error: err.Error()})
			return
		}
		lat := &Cell{Name: "latency-on", Kind: "latency", Hotlist: "on", Brokers: 1, Partitions: p.LatencyPartitions, Consumers: p.LatencyConsumers}
		run(lat, func() error { return r.latencyCell(ctx, lat, url(0), url(0)) })
		for _, n := range p.HotPartitions {
			c := &Cell{Name: fmt.Sprintf("wildcard-%d-on", n), Kind: "wildcard", Hotlist: "on", Brokers: 1, Partitions: n}
			run(c, func() error {
				if !seeded[n] {
					return fmt.Errorf("the queue of %d partitions was not seeded (see wildcard-%d-off)", n, n)
				}
				return r.wildcardCell(ctx, c, url(0), fmt.Sprintf("wild-%d", n))
			})
		}
		many := &Cell{Name: fmt.Sprintf("consumers-%d-on", p.ManyConsumers), Kind: "consumers", Hotlist: "on", Brokers: 1, Partitions: p.ManyPartitions}
		run(many, func() error { return r.consumersCell(ctx, many, url(0), "many-on") })
	} else {
		notAvail(&Cell{Name: "latency-on", Kind: "latency", Hotlist: "on", Brokers: 1})
		for _, n := range p.HotPartitions {
			notAvail(&Cell{Name: fmt.Sprintf("wildcard-%d-on", n), Kind: "wildcard", Hotlist: "on", Brokers: 1, Partitions: n})
		}
		notAvail(&Cell{Name: fmt.Sprintf("consumers-%d-on", p.ManyConsumers), Kind: "consumers", Hotlist: "on", Brokers: 1, Partitions: p.ManyPartitions})
	}

	// Throughput, with the serve default.
	fresh := &Cell{Name: fmt.Sprintf("pop-ack-%d", p.PopBacklog), Kind: "popack", Hotlist: on, Brokers: 1, Partitions: p.PushPartitions, Consumers: p.PopConsumers}
	run(fresh, func() error {
		if err := r.prefill(ctx, url(0), "tp-fresh", p.PopBacklog, p.PushPartitions); err != nil {
			return err
		}
		return r.popAckCell(ctx, fresh, url(0), "tp-fresh", int64(p.PopBacklog))
	})
	push := &Cell{Name: "push-batch100", Kind: "push", Hotlist: on, Brokers: 1, Partitions: p.PushPartitions, Consumers: p.Pushers}
	run(push, func() error { return r.pushCell(ctx, push, url(0), "tp") })
	popack := &Cell{Name: "pop-ack", Kind: "popack", Hotlist: on, Brokers: 1, Partitions: p.PushPartitions, Consumers: p.PopConsumers}
	run(popack, func() error { return r.popAckCell(ctx, popack, url(0), "tp", push.Pushed+1) })

	// Two brokers: push through A, pop through B (the LISTEN/NOTIFY wake).
	if p.TwoBrokers && ctx.Err() == nil && r.selected("latency-2brokers") {
		if err := start(2, true); err != nil {
			add(&Cell{Name: "brokers-two", Status: StatusFailed, Error: err.Error()})
			return
		}
		two := &Cell{Name: "latency-2brokers", Kind: "latency", Hotlist: on, Brokers: 2, Partitions: p.LatencyPartitions, Consumers: p.LatencyConsumers}
		run(two, func() error { return r.latencyCell(ctx, two, url(0), url(1)) })
	}
	e.stopBrokers()
}

// selected says whether --cells (none: every cell) names cell name.
func (r *runner) selected(name string) bool {
	if len(r.cells) == 0 {
		return true
	}
	for _, c := range r.cells {
		if strings.HasPrefix(name, c) {
			return true
		}
	}
	return false
}

func oneLine(c *Cell) string {
	var parts []string
	if c.Latency != nil {
		parts = append(parts, fmt.Sprintf("p50 %.2f ms p99 %.2f ms max %.1f ms", c.Latency.P50, c.Latency.P99, c.Latency.Max))
	}
	if c.PushRate > 0 {
		parts = append(parts, fmt.Sprintf("push %.0f msg/s", c.PushRate))
	}
	if c.ConsumeRate > 0 {
		parts = append(parts, fmt.Sprintf("consumed %.0f msg/s", c.ConsumeRate))
	}
	if c.PopsPerSec > 0 {
		parts = append(parts, fmt.Sprintf("%.0f pops/s", c.PopsPerSec))
	}
	if c.PGPopMsPerPop > 0 {
		parts = append(parts, fmt.Sprintf("PG %.3f ms/pop", c.PGPopMsPerPop))
	}
	if c.PopRequest != nil && c.Kind == "wildcard" {
		parts = append(parts, fmt.Sprintf("pop p50 %.2f ms", c.PopRequest.P50))
	}
	return strings.Join(parts, ", ")
}

func machineFacts() Machine {
	m := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAvg()}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				m.MemTotalKB, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.Commit += " (modified)"
		}
	}
	return m
}

func loadAvg() [3]float64 {
	var l [3]float64
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(raw))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// brokerWarnings collects the WARN / ERROR lines of the brokers' logs
// (at most 20), for the report.
func brokerWarnings(stateDir string) []string {
	files, _ := filepath.Glob(filepath.Join(stateDir, "broker-*.log"))
	var out []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.HasPrefix(line, "panic") {
				if len(out) < 20 {
					out = append(out, filepath.Base(f)+": "+line)
				}
			}
		}
	}
	return out
}

func writeResults(dir string, res *Results) error {
	raw, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, fileJSON), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fileReport), []byte(renderReport(res)), 0o644)
}

// Rerender re-judges the targets and rewrites report.md and results.json
// from dir/results.json.
func Rerender(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, fileJSON))
	if err != nil {
		return err
	}
	var res Results
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(dir, fileJSON), err)
	}
	res.Targets = targets(&res)
	return writeResults(dir, &res)
}
