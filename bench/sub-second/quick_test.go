package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/localpg"
)

// TestQuickProfileSmoke runs `sub-second --quick` end to end (its own
// cluster, pg_cron ticking, pgqd baseline) and checks that it produced its
// report, JSON and charts with data in them — not timings (those belong to
// the report). It takes about 2–3 minutes, so it runs only when asked:
//
//	PGQUE_BENCH_SMOKE=1 go test ./bench/sub-second/ -run Smoke -timeout 10m
func TestQuickProfileSmoke(t *testing.T) {
	if os.Getenv("PGQUE_BENCH_SMOKE") != "1" {
		t.Skip("set PGQUE_BENCH_SMOKE=1 to run the quick benchmark profile (2–3 minutes)")
	}
	out := t.TempDir()
	state := filepath.Join(os.TempDir(), fmt.Sprintf("pgque-bench-smoke-%d", os.Getpid()))
	t.Cleanup(func() {
		for _, dir := range []string{state, state + "-pgcron16"} {
			if c, err := localpg.Open(localpg.Options{StateDir: dir}); err == nil {
				_ = c.Destroy(context.Background())
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	started := time.Now()
	res, err := Run(ctx, Config{Profile: "quick", Phases: quickProfile(), StateDir: state, OutDir: out,
		PgCron16BinDir: smokeEnv(EnvPgCron16BinDir), PgQue020SQL: smokeEnv(EnvPgQue020SQL)})
	if err != nil {
		t.Fatalf("quick profile: %v", err)
	}
	t.Logf("quick profile took %s", time.Since(started).Round(time.Second))
	for _, f := range []string{fileJSON, fileReport, fileCDF, fileDeadTuple} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out, fileJSON))
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("results.json does not parse: %v", err)
	}
	// The pg_cron 1.6 and PgQue 0.2.0 phases are skipped (with a note)
	// unless PGQUE_PGCRON16_BINDIR / PGQUE_PGQUE020_SQL are set.
	if len(back.Phases)+len(back.Skipped) != len(quickProfile()) || len(res.Phases) != len(back.Phases) {
		t.Fatalf("%d phases in results.json and %d skipped, want %d", len(back.Phases), len(back.Skipped), len(quickProfile()))
	}
	for _, p := range back.Phases {
		if p.Rate > 0 && (p.Latency.Count == 0 || p.Produced == 0 || len(p.Samples) == 0) {
			t.Errorf("phase %s measured nothing: %d latencies, %d produced, %d samples", p.Name, p.Latency.Count, p.Produced, len(p.Samples))
		}
		if p.System == SystemPgque && p.Rate > 0 && p.Ticks == 0 {
			t.Errorf("phase %s saw no ticks: pg_cron did not tick", p.Name)
		}
	}
	if back.WALPerTick <= 0 {
		t.Errorf("WAL per tick probe: %v", back.WALPerTick)
	}
	report, _ := os.ReadFile(filepath.Join(out, fileReport))
	for _, want := range []string{"## Targets", "## Phases", "pgque-100hz-800-xmin-poll", "pgq-100hz-800-xmin-poll"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

// smokeEnv reads a variable for the smoke run. scripts/test.sh exports
// PGQUE_PGCRON16_BINDIR for the handover tests; the smoke run leaves the
// pg_cron 1.6 phases out unless PGQUE_BENCH_SMOKE_CRON16=1, to stay short.
func smokeEnv(name string) string {
	if name == EnvPgCron16BinDir && os.Getenv("PGQUE_BENCH_SMOKE_CRON16") != "1" {
		return ""
	}
	return os.Getenv(name)
}
