package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Target verdicts besides met / MISSED.
const (
	verdictMet         = "met"
	verdictMissed      = "MISSED"
	verdictNotMeasured = "not measured"
)

func findCell(res *Results, name string) *Cell {
	for _, c := range res.Cells {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// targets judges the goals of issues 11 and 12 against the cells.
func targets(res *Results) []Target {
	var out []Target
	// unavailable tells why a cell cannot be judged ("" when it can).
	unavailable := func(c *Cell) string {
		switch {
		case c == nil:
			return verdictNotMeasured
		case c.Status == StatusNotAvailable:
			return StatusNotAvailable
		case c.Status != StatusMeasured:
			return verdictNotMeasured + " (" + c.Status + ")"
		}
		return ""
	}
	judge := func(ok bool) string {
		if ok {
			return verdictMet
		}
		return verdictMissed
	}
	for _, name := range []string{"latency-off", "latency-on", "latency-2brokers"} {
		c := findCell(res, name)
		if name == "latency-2brokers" && c == nil {
			continue
		}
		for _, t := range []struct {
			what  string
			limit float64
			get   func(*Dist) float64
		}{{"p50", 3, func(d *Dist) float64 { return d.P50 }}, {"p99", 15, func(d *Dist) float64 { return d.P99 }}} {
			tg := Target{Name: fmt.Sprintf("%s: push→pop %s at 1k msg/s", name, t.what), Want: fmt.Sprintf("≤ %g ms", t.limit)}
			if why := unavailable(c); why != "" {
				tg.Status, tg.Got = why, "—"
			} else if res.Params.LatencyRate != 1000 {
				tg.Status, tg.Got = "not judged", fmt.Sprintf("%.2f ms at %d msg/s", t.get(c.Latency), res.Params.LatencyRate)
			} else {
				v := t.get(c.Latency)
				tg.Got = fmt.Sprintf("%.2f ms", v)
				tg.Status = judge(c.Latency.Count > 0 && v <= t.limit && c.Missing == 0)
				if c.Missing > 0 {
					tg.Got += fmt.Sprintf(" (%d messages not popped in time)", c.Missing)
				}
			}
			out = append(out, tg)
		}
	}
	push := findCell(res, "push-batch100")
	tg := Target{Name: "push throughput, batches of 100", Want: "≥ 20,000 msg/s"}
	if why := unavailable(push); why != "" {
		tg.Status, tg.Got = why, "—"
	} else {
		tg.Got = fmt.Sprintf("%.0f msg/s", push.PushRate)
		tg.Status = judge(push.PushRate >= 20000)
	}
	out = append(out, tg)

	// Wildcard pops: PostgreSQL time per pop, on vs off at 10,000 and on
	// at 10,000 vs on at 100.
	off10k, on10k, on100 := findCell(res, "wildcard-10000-off"), findCell(res, "wildcard-10000-on"), findCell(res, "wildcard-100-on")
	tg = Target{Name: "wildcard pop at 10,000 partitions: PostgreSQL time per pop, off ÷ on", Want: "≥ 20×"}
	switch {
	case unavailable(on10k) == StatusNotAvailable:
		tg.Status, tg.Got = StatusNotAvailable, "—"
	case unavailable(off10k) != "" || unavailable(on10k) != "":
		tg.Status, tg.Got = verdictNotMeasured+" (the profile has no 10,000-partition cells)", "—"
		if off10k != nil || on10k != nil {
			tg.Status = verdictNotMeasured
		}
	case on10k.PGPopMsPerPop <= 0:
		tg.Status, tg.Got = verdictMet, fmt.Sprintf("off %.3f ms, on 0 ms", off10k.PGPopMsPerPop)
	default:
		ratio := off10k.PGPopMsPerPop / on10k.PGPopMsPerPop
		tg.Got = fmt.Sprintf("%.1f× (off %.3f ms, on %.3f ms)", ratio, off10k.PGPopMsPerPop, on10k.PGPopMsPerPop)
		tg.Status = judge(ratio >= 20)
	}
	out = append(out, tg)
	tg = Target{Name: "wildcard pop, hot-list on: PostgreSQL time per pop at 10,000 ÷ at 100 partitions", Want: "≤ 1.5×"}
	switch {
	case unavailable(on100) == StatusNotAvailable:
		tg.Status, tg.Got = StatusNotAvailable, "—"
	case unavailable(on100) != "" || unavailable(on10k) != "":
		tg.Status, tg.Got = verdictNotMeasured, "—"
		if on10k == nil {
			tg.Status += " (the profile has no 10,000-partition cells)"
		}
	case on100.PGPopMsPerPop <= 0:
		tg.Status, tg.Got = verdictNotMeasured+" (no PostgreSQL time at 100)", "—"
	default:
		ratio := on10k.PGPopMsPerPop / on100.PGPopMsPerPop
		tg.Got = fmt.Sprintf("%.2f× (100: %.3f ms, 10,000: %.3f ms)", ratio, on100.PGPopMsPerPop, on10k.PGPopMsPerPop)
		tg.Status = judge(ratio <= 1.5)
	}
	out = append(out, tg)
	return out
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }

func distCols(d *Dist) string {
	if d == nil || d.Count == 0 {
		return "— | — | — | —"
	}
	return fmt.Sprintf("%.2f | %.2f | %.2f | %.1f", d.P50, d.P90, d.P99, d.Max)
}

// pair is "p50 | p99" of d, dashes when there is none.
func pair(d *Dist) string {
	if d == nil || d.Count == 0 {
		return "— | —"
	}
	return fmt.Sprintf("%.2f | %.2f", d.P50, d.P99)
}

func statusCol(c *Cell) string {
	switch c.Status {
	case StatusMeasured:
		return ""
	case StatusFailed:
		return "FAILED: " + c.Error
	}
	return c.Status
}

func renderReport(res *Results) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	m := res.Machine
	w("# bench/broker — %s profile, %s\n\n", res.Profile, res.Started.Format("2006-01-02 15:04 UTC"))
	w("Command: `%s`", strings.Join(res.Command, " "))
	if len(res.ServeFlags) > 0 {
		w(" (extra serve flags: `%s`)", strings.Join(res.ServeFlags, " "))
	}
	w("\n\n")
	w("| machine | |\n|---|---|\n")
	w("| CPUs (nproc) | %d |\n| memory | %d MiB |\n| kernel | %s |\n| load average at start | %.2f %.2f %.2f |\n| load average at end | %.2f %.2f %.2f |\n",
		m.NProc, m.MemTotalKB/1024, m.Kernel, m.LoadStart[0], m.LoadStart[1], m.LoadStart[2], m.LoadEnd[0], m.LoadEnd[1], m.LoadEnd[2])
	w("| PostgreSQL | %s |\n| Go | %s |\n| commit | %s |\n", m.PostgreSQL, m.GoVersion, m.Commit)
	hl := "yes (`serve --hotlist`)"
	if !res.HotlistSwitch {
		hl = "no: this build's `serve` has no `--hotlist`; the \"on\" cells are not available"
	}
	w("| hot-list switch | %s |\n", hl)
	w("| scheduled ticking | %s |\n", tickerText(res.Ticker))
	txText := "no (the broker keys each message by its id)"
	if res.TransactionIDs {
		txText = "yes: a random UUID per item, as Queen's JS client sends (`--transaction-ids`)"
	}
	w("| latency producer's transactionIds | %s |\n", txText)
	w("| duration | %s |\n\n", res.Finished.Sub(res.Started).Round(time.Second))
	// Judged on the load before the run: the load at the end counts this
	// benchmark's own processes (64 consumers in its last cells), and how
	// busy the machine was during each cell is in the CPU table.
	if m.LoadStart[0] > float64(m.NProc) {
		w("**The machine was busy before the run** (load average %.1f on %d CPUs, from other work): latencies and rates are lower bounds of what the code does on a quiet machine; compare cells of one run, not runs.\n\n", m.LoadStart[0], m.NProc)
	}
	if res.Interrupted {
		w("**Interrupted**: the cells after the signal did not run.\n\n")
	}
	if res.FailedCells > 0 {
		w("**%d cell(s) failed** (see the tables).\n\n", res.FailedCells)
	}

	w("## Targets\n\n| target | want | got | verdict |\n|---|---|---|---|\n")
	for _, t := range res.Targets {
		w("| %s | %s | %s | %s |\n", t.Name, t.Want, t.Got, t.Status)
	}

	w("\n## Push → pop latency (open-loop producer at %d msg/s, one message per push; %d long-polling consumers, wildcard pop, ack)\n\n",
		res.Params.LatencyRate, res.Params.LatencyConsumers)
	w("Latency = pop answer received − push answer (201) received, per message, in ms.\n\n")
	w("| cell | hot-list | brokers | messages | push msg/s | p50 | p90 | p99 | max | send→pop p50 | p99 | push request p50 | p99 | popped before push answer | missing | dup | WAL B/msg | note |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range res.Cells {
		if c.Kind != "latency" {
			continue
		}
		if c.Status != StatusMeasured {
			w("| %s | %s | %d | | | | | | | | | | | | | | | %s |\n", c.Name, c.Hotlist, c.Brokers, statusCol(c))
			continue
		}
		w("| %s | %s | %d | %d | %s | %s | %s | %s | %d | %d | %d | %s | %s |\n", c.Name, c.Hotlist, c.Brokers, c.Pushed, f0(c.PushRate),
			distCols(c.Latency), pair(c.SendLatency), pair(c.PushRequest),
			c.BeforeAck, c.Missing, c.Duplicates, f0(c.WALPerPushed), noteCol(c))
	}

	w("\nWhere the time went (ms, p50 / p99; the broker's Server-Timing): a push's database call (`db`, its pgque.push, combined with the pushes that arrived meanwhile); a pop that returned messages: its database calls and its time parked; the ack request (client side).\n\n")
	w("| cell | push db p50 | p99 | pop db p50 | p99 | pop parked p50 | p99 | ack request p50 | p99 |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range res.Cells {
		if c.Kind != "latency" || c.Status != StatusMeasured {
			continue
		}
		st := func(n string) string { return pair(c.Steps[n]) }
		w("| %s | %s | %s | %s | %s |\n", c.Name, st("push_db"), st("pop_db"), st("pop_park"), st("ack"))
	}

	w("\n## Throughput (%d pushers × %d items per push over %d partitions; then %d consumers pop (wildcard, batch %d) and ack that backlog)\n\n",
		res.Params.Pushers, res.Params.PushBatch, res.Params.PushPartitions, res.Params.PopConsumers, res.Params.PopBatch)
	w("| cell | hot-list | seconds | messages | msg/s | requests/s | request p50 ms | p99 ms | WAL bytes | WAL B/msg | note |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range res.Cells {
		switch {
		case c.Kind != "push" && c.Kind != "popack":
		case c.Status != StatusMeasured:
			w("| %s | %s | | | | | | | | | %s |\n", c.Name, c.Hotlist, statusCol(c))
		case c.Kind == "push":
			reqs := 0.0
			if c.PushRequest != nil && c.Seconds > 0 {
				reqs = float64(c.PushRequest.Count) / c.Seconds
			}
			w("| %s | %s | %.1f | %d | %s | %s | %s | %d | %s | %s |\n", c.Name, c.Hotlist, c.Seconds, c.Pushed, f0(c.PushRate), f0(reqs),
				pair(c.PushRequest), c.WALBytes, f0(c.WALPerPushed), noteCol(c))
		default:
			w("| %s | %s | %.1f | %d | %s | %s | %s | %d | %s | %s |\n", c.Name, c.Hotlist, c.Seconds, c.Consumed, f0(c.ConsumeRate), f0(c.PopsPerSec),
				pair(c.PopRequest), c.WALBytes, f0(c.WALPerConsumed), noteCol(c))
		}
	}

	w("\n## Wildcard pop: 10 hot partitions of 100 / 1,000 / 10,000 (%d msg/s into the hot ones; %d consumers pop without waiting, 5 ms pause after an empty pop)\n\n",
		res.Params.HotRate, res.Params.HotConsumers)
	w("PostgreSQL ms/pop = pg_stat_statements total_exec_time of the pop statements (`pop_any`, `pop_list`, …) and of the hot-list's reseed scans (`group_reseed`) ÷ HTTP pops in the cell; the reseeds' part is the next column.\n\n")
	w("| cell | partitions | hot-list | pops | pops/s | with messages | pop p50 ms | p90 | p99 | max | PostgreSQL ms/pop | of which reseed | SQL pop calls | consumed | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range sortedWildcard(res.Cells) {
		if c.Status != StatusMeasured {
			w("| %s | %d | %s | | | | | | | | | | | | %s |\n", c.Name, c.Partitions, c.Hotlist, statusCol(c))
			continue
		}
		w("| %s | %d | %s | %d | %s | %d | %s | %.3f | %.3f | %d | %d | %s |\n", c.Name, c.Partitions, c.Hotlist, c.Pops, f0(c.PopsPerSec), c.PopsWithMsg,
			distCols(c.PopRequest), c.PGPopMsPerPop, c.PGReseedMsPerPop, calls(c, "pop"), c.Consumed, noteCol(c))
	}

	w("\n## Many consumers (%d long-polling consumers, batch %d, over %d partitions)\n\n", res.Params.ManyConsumers, res.Params.ManyBatch, res.Params.ManyPartitions)
	w("| cell | hot-list | pops/s (with messages) | pops | msg/s consumed | pop p50 ms | p99 ms | PostgreSQL ms/pop | note |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range res.Cells {
		switch {
		case c.Kind != "consumers":
		case c.Status != StatusMeasured:
			w("| %s | %s | | | | | | | %s |\n", c.Name, c.Hotlist, statusCol(c))
		default:
			w("| %s | %s | %s | %d | %s | %s | %.3f | %s |\n", c.Name, c.Hotlist, f0(c.PopsPerSec), c.Pops, f0(c.ConsumeRate),
				pair(c.PopRequest), c.PGPopMsPerPop, noteCol(c))
		}
	}

	w("\n## PostgreSQL statements per cell (pg_stat_statements: calls / total ms)\n\n%s\n\n| cell | push | pop | reseed | ack | scheduled tick | other |\n|---|---|---|---|---|---|---|\n", statementLegend(res))
	for _, c := range res.Cells {
		if c.Status != StatusMeasured {
			continue
		}
		w("| %s |", c.Name)
		// Classes this report has no column for (a results.json of an
		// older run: "broker_tick") are counted under other.
		var other *StmtStats
		for k, st := range c.Statements {
			if !slices.Contains(statementColumns, k) || k == "other" {
				if other == nil {
					other = &StmtStats{}
				}
				other.Calls += st.Calls
				other.TotalMs += st.TotalMs
			}
		}
		for _, k := range statementColumns {
			st := c.Statements[k]
			if k == "other" {
				st = other
			}
			if st != nil {
				w(" %d / %.0f |", st.Calls, st.TotalMs)
			} else {
				w(" — |")
			}
		}
		w("\n")
	}
	cpuRows := 0
	for _, c := range res.Cells {
		if cols := cpuCols(c); cols != "" {
			if cpuRows == 0 {
				w("\n## CPU per message\n\nThe cell's CPU time (user + system, from `/proc`) by process, in ms per message pushed: **PostgreSQL** = the bench cluster's postmaster and all its backends (live, and those that exited during the cell); **serve** = the `pgquectl serve` process(es); **ticker** = the `pgquectl tick --run` daemon; **client** = the load client: in the latency cells a process of its own doing only the cell's pushes, pops and acks (GOMAXPROCS=1), in the other cells this harness; **all** = their sum. Machine busy = all CPUs of the machine, steal included (other work too). Harness = this harness's own process while a load client ran (readings, profiles; not in all).\n\n")
				w("| cell | messages | all ms/msg | PostgreSQL ms/msg | serve ms/msg | ticker ms/msg | client ms/msg | machine busy | harness ms/msg |\n|---|---|---|---|---|---|---|---|---|\n")
			}
			cpuRows++
			w("| %s | %d | %s |\n", c.Name, c.Pushed, cols)
		}
	}
	for _, c := range res.Cells {
		if len(c.Profiles) > 0 {
			w("\nCPU profiles of %s (`go tool pprof -top FILE`): %s\n", c.Name, "`"+strings.Join(c.Profiles, "`, `")+"`")
		}
	}
	failures := 0
	for _, c := range res.Cells {
		if c.Errors > 0 {
			failures++
		}
	}
	if failures > 0 {
		w("\n## Request errors\n\n")
		for _, c := range res.Cells {
			if c.Errors > 0 {
				w("- %s: %d failed requests\n", c.Name, c.Errors)
			}
		}
	}
	if len(res.BrokerLogLines) > 0 {
		w("\n## Broker warnings (first 20)\n\n```\n%s\n```\n", strings.Join(res.BrokerLogLines, "\n"))
	}
	w("\n## Settings\n\nCluster (own, durable): ")
	keys := make([]string, 0, len(res.Settings))
	for k := range res.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			w(", ")
		}
		w("`%s=%s`", k, res.Settings[k])
	}
	w(". Every cell that measures WAL starts with CHECKPOINT and resets pg_stat_statements; the wildcard cells reset without a checkpoint after a 1 s warm-up under load.\n")
	return b.String()
}

// statementLegend says which calls the statements table's columns hold,
// as res's cells were grouped.
func statementLegend(res *Results) string {
	if res.StatementGroups < 1 {
		return "push = `pgque.push`, pop = `pop_any`, `pop_list`, `pop_partition`, `pop_by_label`, reseed = `group_reseed`, ack = `group_ack`, scheduled tick = `ticker`, `force_next_tick`. " +
			"This results.json predates the grouping of the broker's generated calls: its `push_direct_q…`/`push_route` and `ack_direct_q…`/`ack_route` calls, if the run made any, are under other."
	}
	return "push = `pgque.push` and the fast path's `push_route` + `push_direct_q<id>_t<n>`, pop = `pop_any`, `pop_list`, `pop_partition`, `pop_by_label`, reseed = `group_reseed`, " +
		"ack = `group_ack` and the fast path's `ack_route` + `ack_direct_q<id>_t<n>`, scheduled tick = `ticker`, `force_next_tick`."
}

// statementColumns are the statement classes of the statements table.
var statementColumns = []string{"push", "pop", "reseed", "ack", "tick", "other"}

func noteCol(c *Cell) string { return strings.Join(c.Notes, "; ") }

func calls(c *Cell, class string) int64 {
	if s := c.Statements[class]; s != nil {
		return s.Calls
	}
	return 0
}

// sortedWildcard lists the wildcard cells by partitions, off before on.
func sortedWildcard(cells []*Cell) []*Cell {
	var out []*Cell
	for _, c := range cells {
		if c.Kind == "wildcard" {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Partitions != out[j].Partitions {
			return out[i].Partitions < out[j].Partitions
		}
		return out[i].Hotlist < out[j].Hotlist
	})
	return out
}

func tickerText(t string) string {
	switch t {
	case TickerDaemon:
		return "`pgquectl tick --run --hz 100` (the ticker daemon: ticks, rotation, maintenance) beside the brokers"
	case TickerCron:
		return "pg_cron jobs at 100 Hz (`pgquectl tick --hz 100`)"
	case TickerNone:
		return "none (no rotation, no ticks for classic consumers)"
	}
	return t
}
