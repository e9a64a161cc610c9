// Command sub-second measures sub-second ticking: producer-commit →
// consumer-receive latency, WAL, dead tuples and tick gaps of the pgque
// engine ticked by pg_cron, against upstream PgQ ticked by pgqd, in a
// PostgreSQL cluster of its own. See README.md.
//
//	go run ./bench/sub-second --quick
//	go run ./bench/sub-second --profile full --out bench/sub-second/results/$(date +%F)
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
	"syscall"
	"time"
)

func main() { os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr)) }

// Main parses flags, runs the benchmark and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sub-second", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "the quick profile (< 3 minutes; CI smoke test)")
	profile := fs.String("profile", "full", "phase list: quick (< 3 min, CI), headline (~6 min: the pg_cron 1.4 headline cell, with and without the held xmin), managed (~10 min: pg_cron 1.6 with PgQue 0.2.0 beside us, 16 consumers, WAL ratio), wal (~6 min: the WAL ratio and idle pairs of pgquectl only) or full")
	duration := fs.Duration("duration", 0, "measure every phase of the profile for this long instead of its own duration")
	out := fs.String("out", "", "output directory (default bench/sub-second/results/<date>)")
	state := fs.String("state-dir", "/tmp/pgque-bench-subsecond", "state directory of the benchmark's own cluster (wiped first)")
	keep := fs.Bool("keep-cluster", false, "leave the cluster running at the end")
	noBar := fs.Bool("no-progress", false, "no progress bar")
	poll := fs.Duration("poll", 0, "poll interval of the poll-only consumer (default 1ms)")
	rerender := fs.String("report", "", "re-render report.md and the charts from DIR/results.json, run nothing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *rerender != "" {
		if err := Rerender(*rerender); err != nil {
			fmt.Fprintln(stderr, "sub-second:", err)
			return 1
		}
		fmt.Fprintf(stdout, "re-rendered %s/%s and charts\n", *rerender, fileReport)
		return 0
	}
	if *quick {
		*profile = "quick"
	}
	phases, err := Profile(*profile)
	if err != nil {
		fmt.Fprintln(stderr, "sub-second:", err)
		return 2
	}
	if *duration > 0 {
		for i := range phases {
			phases[i].Duration = *duration
		}
	}
	if *out == "" {
		*out = filepath.Join("bench", "sub-second", "results", time.Now().Format("2006-01-02"))
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := Config{Profile: *profile, Phases: phases, StateDir: *state, OutDir: *out, KeepCluster: *keep,
		PollInterval: *poll, Log: log,
		PgCron16BinDir: os.Getenv(EnvPgCron16BinDir), PgQue020SQL: os.Getenv(EnvPgQue020SQL)}
	if !*noBar {
		cfg.Progress = stderr
	}
	// The first signal stops the run cleanly (the report still gets written);
	// a second one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "sub-second:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s/%s, %s and charts (%d phases)\n", cfg.OutDir, fileReport, fileJSON, len(res.Phases))
	if res.Interrupted {
		return 130
	}
	return 0
}
