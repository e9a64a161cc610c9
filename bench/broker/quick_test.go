package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/localpg"
)

// TestQuickProfileSmoke runs `bench/broker --quick` end to end (its own
// cluster, a freshly built pgquectl, one and two brokers) and checks that
// every cell ran and reported sane numbers — never the targets (those are
// the report's business; this machine is shared). About 2 minutes, so it
// runs only when asked (scripts/test.sh asks):
//
//	PGQUE_BENCH_SMOKE=1 go test ./bench/broker/ -run Smoke -count=1 -timeout 10m -v
//
// PGQUE_BENCH_BROKER_BIN runs a prebuilt pgquectl instead of building one.
func TestQuickProfileSmoke(t *testing.T) {
	if os.Getenv("PGQUE_BENCH_SMOKE") != "1" {
		t.Skip("set PGQUE_BENCH_SMOKE=1 to run the quick broker benchmark profile (about 2 minutes)")
	}
	out := t.TempDir()
	state := filepath.Join(os.TempDir(), fmt.Sprintf("pgque-bench-broker-smoke-%d", os.Getpid()))
	t.Cleanup(func() {
		if c, err := localpg.Open(localpg.Options{StateDir: filepath.Join(state, "pg")}); err == nil {
			_ = c.Destroy(context.Background())
		}
		_ = os.RemoveAll(state)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	started := time.Now()
	params := quickParams()
	res, err := Run(ctx, Config{Profile: "quick", Params: params, StateDir: state, OutDir: out,
		Binary: os.Getenv("PGQUE_BENCH_BROKER_BIN"), Command: []string{"go test ./bench/broker/ (smoke)"},
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil)), Stderr: testWriter{t}})
	if err != nil {
		t.Fatalf("quick profile: %v", err)
	}
	t.Logf("quick profile took %s", time.Since(started).Round(time.Second))

	raw, err := os.ReadFile(filepath.Join(out, fileJSON))
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("results.json does not parse: %v", err)
	}
	report, err := os.ReadFile(filepath.Join(out, fileReport))
	if err != nil {
		t.Fatal(err)
	}
	// Every cell of the profile: 3 latency (off, on, two brokers), 2 per
	// wildcard size, 2 many-consumer, pop+ack of a fresh backlog, push,
	// pop+ack of the push cell's backlog.
	want := 3 + 2*len(params.HotPartitions) + 2 + 3
	if len(back.Cells) != want || len(res.Cells) != want {
		t.Fatalf("%d cells in results.json (%d returned), want %d", len(back.Cells), len(res.Cells), want)
	}
	if back.Machine.NProc < 1 || !strings.Contains(back.Machine.PostgreSQL, "PostgreSQL") {
		t.Errorf("machine facts: %+v", back.Machine)
	}
	for _, c := range back.Cells {
		if !strings.Contains(string(report), "| "+c.Name+" |") {
			t.Errorf("report.md has no row for %s", c.Name)
		}
		if c.Status == StatusNotAvailable && c.Hotlist == "on" && !back.HotlistSwitch {
			continue
		}
		if c.Status != StatusMeasured {
			t.Errorf("cell %s: %s %s", c.Name, c.Status, c.Error)
			continue
		}
		saneCell(t, c)
	}
	if len(back.Targets) < 5 {
		t.Errorf("%d targets judged, want at least 5", len(back.Targets))
	}
	for _, h := range []string{"## Targets", "## Push → pop latency", "## Throughput", "## Wildcard pop", "## Many consumers"} {
		if !strings.Contains(string(report), h) {
			t.Errorf("report.md lacks %q", h)
		}
	}
}

// saneCell checks that a measured cell measured something plausible.
func saneCell(t *testing.T, c *Cell) {
	t.Helper()
	if c.Seconds <= 0 {
		t.Errorf("%s: ran %v s", c.Name, c.Seconds)
	}
	if c.WALBytes <= 0 {
		t.Errorf("%s: no WAL written (%d bytes)", c.Name, c.WALBytes)
	}
	switch c.Kind {
	case "latency":
		if c.Pushed == 0 || c.Latency == nil || c.Latency.Count == 0 {
			t.Errorf("%s: %d pushed, latency %+v", c.Name, c.Pushed, c.Latency)
			return
		}
		// Every answered push was popped, or counted as missing.
		if int64(c.Latency.Count)+c.Missing != c.Pushed {
			t.Errorf("%s: %d latencies + %d missing != %d pushed", c.Name, c.Latency.Count, c.Missing, c.Pushed)
		}
		if c.Latency.P50 < 0 || c.Latency.P50 > c.Latency.P99 || c.Latency.P99 > c.Latency.Max || c.Latency.Max > 60_000 {
			t.Errorf("%s: latency %+v not ordered or beyond a minute", c.Name, c.Latency)
		}
		saneWAL(t, c.Name, c.WALPerPushed, 50)
		// The load ran in a process of its own, the harness beside it.
		if c.CPU == nil || c.CPU.Seconds["client"] <= 0 || !hasKey(c.CPU.Seconds, "harness") {
			t.Errorf("%s: CPU %+v, want the load client's and the harness's apart", c.Name, c.CPU)
		}
	case "push":
		if c.Pushed < 100 || c.PushRate <= 0 || c.Errors > 0 {
			t.Errorf("%s: %d pushed at %.0f msg/s, %d errors", c.Name, c.Pushed, c.PushRate, c.Errors)
		}
		saneWAL(t, c.Name, c.WALPerPushed, 50)
	case "popack":
		if c.Consumed == 0 || c.Pops == 0 {
			t.Errorf("%s: %d consumed in %d pops", c.Name, c.Consumed, c.Pops)
		}
		// Consuming writes a cursor update per partition batch (100
		// messages), not the message: a few bytes per message.
		saneWAL(t, c.Name, c.WALPerConsumed, 1)
	case "wildcard", "consumers":
		if c.Pops == 0 || c.PopRequest == nil || c.PopRequest.Count != int(c.Pops) || c.Consumed == 0 {
			t.Errorf("%s: %d pops (%+v), %d consumed", c.Name, c.Pops, c.PopRequest, c.Consumed)
		}
		if s := c.Statements["pop"]; c.Hotlist == "off" && (s == nil || s.Calls == 0 || c.PGPopMsPerPop <= 0) {
			t.Errorf("%s: the SQL scan ran no pop statement (pg_stat_statements %+v, %.3f ms/pop)", c.Name, s, c.PGPopMsPerPop)
		}
	default:
		t.Errorf("%s: unknown kind %q", c.Name, c.Kind)
	}
}

func hasKey(m map[string]float64, k string) bool { _, ok := m[k]; return ok }

// saneWAL checks WAL bytes per message against min (pushing writes the
// message, ~100 bytes of JSON: at least 50) and 100 kB (beyond that the
// measurement is off).
func saneWAL(t *testing.T, name string, perMsg, min float64) {
	t.Helper()
	if perMsg < min || perMsg > 100_000 {
		t.Errorf("%s: %.0f WAL bytes per message", name, perMsg)
	}
}

// testWriter sends the harness's log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
