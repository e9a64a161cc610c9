// Command broker benchmarks `pgquectl serve`, the HTTP broker, end to end:
// push→pop latency through HTTP with long-polling consumers, push and
// pop+ack throughput, WAL per message, and the wildcard pop with the
// hot-list on and off over 100 / 1,000 / 10,000 partitions. It runs its own
// PostgreSQL cluster (pg_stat_statements preloaded) and its own broker
// processes. See README.md.
//
//	go run ./bench/broker --quick
//	go run ./bench/broker --profile full --out bench/broker/results/$(date +%F)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() { os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr)) }

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// splitList splits a comma-separated flag value (empty: nil).
func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Main parses flags, runs the benchmark and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == loadClientArg {
		return loadClientMain(os.Stdin, stdout, stderr)
	}
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "the quick profile (< 2 minutes; the CI smoke test)")
	profile := fs.String("profile", "full", "cell list: quick (< 2 min) or full (≤ 15 min)")
	out := fs.String("out", "", "output directory (default bench/broker/results/<date>)")
	state := fs.String("state-dir", "/tmp/pgque-bench-broker", "state directory of the benchmark's own cluster and brokers (wiped first)")
	bin := fs.String("pgquectl", "", "a pgquectl binary to run (default: go build ./cmd/pgquectl into the state directory)")
	keep := fs.Bool("keep-cluster", false, "leave the cluster running at the end")
	ticker := fs.String("ticker", TickerDaemon, "scheduled ticking beside the brokers: daemon (pgquectl tick --run --hz 100), cron (pg_cron jobs at 100 Hz; pg_cron 1.4 starts them at the next minute) or none")
	servePprof := fs.Bool("serve-pprof", false, "run serve with --pprof and save its CPU profile of each latency cell to OUT/<cell>-serve.pprof")
	txIDs := fs.Bool("transaction-ids", false, "the latency cells' producer sends a random transactionId (UUID) with every item, as Queen's JS client does (default off: the broker then keys messages by their id and skips its dedup check)")
	clientPprof := fs.Bool("client-pprof", false, "save the load client's CPU profile of each latency cell to OUT/<cell>-client.pprof")
	rerender := fs.String("report", "", "re-judge the targets and re-render report.md from DIR/results.json, run nothing")
	parts := fs.String("partitions", "", "partition counts of the wildcard cells, comma-separated (default: the profile's: quick 100,1000; full 100,1000,10000)")
	latDur := fs.Duration("latency-duration", 0, "length of the latency cells' producer run instead of the profile's (quick 3s, full 1m)")
	latRate := fs.Int("latency-rate", 0, "the latency cells' producer rate in messages/s instead of the profile's 1000 (the targets are judged at 1000 only: a lower rate shows the unloaded floor)")
	latCons := fs.Int("latency-consumers", 0, "long-polling consumers of the latency cells instead of the profile's 2 (each pops, then acks what it got)")
	track := fs.String("statements-track", "top", "pg_stat_statements.track of the cluster: top (the report's statement groups) or all (nested statements too, with planning time: for finding where a function's time goes; the report's groups then hold only top-level rows)")
	cells := fs.String("cells", "", "run only these cells (comma-separated names or name prefixes, e.g. latency-off,push-batch100); the others are listed as skipped")
	var serveFlags, settings multiFlag
	fs.Var(&settings, "cluster-setting", "a postgresql.conf line of the benchmark's cluster, name=value as written in the file (repeat it: --cluster-setting synchronous_commit=off); the report lists the cluster's settings")
	fs.Var(&serveFlags, "serve-flag", "extra flag for every `pgquectl serve` (repeat it: --serve-flag=--pool-size=40 --serve-flag=--log-level=info)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *rerender != "" {
		if err := Rerender(*rerender); err != nil {
			fmt.Fprintln(stderr, "broker bench:", err)
			return 1
		}
		fmt.Fprintf(stdout, "re-rendered %s/%s\n", *rerender, fileReport)
		return 0
	}
	if *quick {
		*profile = "quick"
	}
	switch *ticker {
	case TickerDaemon, TickerCron, TickerNone:
	default:
		fmt.Fprintf(stderr, "broker bench: --ticker %q: use daemon, cron or none\n", *ticker)
		return 2
	}
	params, err := Profile(*profile)
	if err != nil {
		fmt.Fprintln(stderr, "broker bench:", err)
		return 2
	}
	if *parts != "" {
		params.HotPartitions = nil
		for _, f := range strings.Split(*parts, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 10 {
				fmt.Fprintf(stderr, "broker bench: --partitions: %q is not a count of at least 10 (10 of them are hot)\n", f)
				return 2
			}
			params.HotPartitions = append(params.HotPartitions, n)
		}
	}
	if *latDur < 0 {
		fmt.Fprintf(stderr, "broker bench: --latency-duration %v: must be positive\n", *latDur)
		return 2
	}
	if *latDur > 0 {
		params.LatencyDuration = *latDur
	}
	if *latRate < 0 || *latRate > 100000 {
		fmt.Fprintf(stderr, "broker bench: --latency-rate %d: give 1..100000 messages/s\n", *latRate)
		return 2
	}
	if *latRate > 0 {
		params.LatencyRate = *latRate
	}
	if *latCons < 0 || *latCons > 1000 {
		fmt.Fprintf(stderr, "broker bench: --latency-consumers %d: give 1..1000 consumers\n", *latCons)
		return 2
	}
	if *latCons > 0 {
		params.LatencyConsumers = *latCons
	}
	extra := map[string]string{}
	for _, kv := range settings {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" || strings.TrimSpace(v) == "" {
			fmt.Fprintf(stderr, "broker bench: --cluster-setting %q: write name=value, e.g. synchronous_commit=off\n", kv)
			return 2
		}
		extra[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if *track != "top" && *track != "all" {
		fmt.Fprintf(stderr, "broker bench: --statements-track %q: use top or all\n", *track)
		return 2
	}
	if *out == "" {
		*out = filepath.Join("bench", "broker", "results", time.Now().UTC().Format("2006-01-02"))
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := Config{Profile: *profile, Params: params, StateDir: *state, OutDir: *out, Binary: *bin,
		ServeFlags: serveFlags, ClusterSettings: extra, KeepCluster: *keep, Cells: splitList(*cells), Ticker: *ticker, StatementsTrack: *track, Log: log,
		ServePprof: *servePprof, ClientPprof: *clientPprof, TransactionIDs: *txIDs, Stderr: stderr,
		Command: append([]string{"go run ./bench/broker"}, args...)}
	// The first signal stops the run (the report of the cells done is still
	// written); a second one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "broker bench:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s/%s and %s (%d cells)\n", cfg.OutDir, fileReport, fileJSON, len(res.Cells))
	if res.Interrupted {
		return 130
	}
	return 0
}
