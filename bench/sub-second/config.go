package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Systems under test.
const (
	SystemPgque = "pgque" // this engine, ticked by pg_cron (CALL pgque.ticker_loop())
	SystemPgQ   = "pgq"   // upstream PgQ 3 (Debian postgresql-15-pgq3) ticked by pgqd
)

// Consumer wake modes.
const (
	WakePoll   = "poll"   // poll-only: receive every PollInterval
	WakeListen = "listen" // LISTEN pgque_<queue> + a slow poll as fallback
)

// Phase is one cell of the matrix: one system, one setting of every variable,
// measured for Duration.
type Phase struct {
	Name     string        `json:"name"`
	System   string        `json:"system"`
	Hz       int           `json:"hz"`
	Rate     int           `json:"events_per_sec"` // 0 = idle
	Queues   int           `json:"queues"`         // idle queues when Rate = 0; 1 active queue otherwise
	HeldXmin bool          `json:"held_xmin"`
	Wake     string        `json:"wake"`
	Rotation time.Duration `json:"rotation_period"` // metadata rotation; 0 = derived
	Duration time.Duration `json:"duration"`
}

// Period is the tick period of the phase.
func (p Phase) Period() time.Duration { return time.Second / time.Duration(p.Hz) }

// RotationLabel names the rotation setting.
func (p Phase) RotationLabel() string {
	if p.Rotation == 0 {
		return "derived"
	}
	return p.Rotation.String()
}

// Config configures a run of the harness.
type Config struct {
	// Profile names the phase list ("quick" or "full"), for the report.
	Profile string
	// Phases to run, in order.
	Phases []Phase
	// StateDir holds the benchmark's own PostgreSQL cluster (wiped first).
	StateDir string
	// OutDir receives results.json, report.md and the charts.
	OutDir string
	// PollInterval of the poll-only consumer (and the producer's pacing unit).
	PollInterval time.Duration
	// ListenFallback is the poll period of the LISTEN consumer.
	ListenFallback time.Duration
	// SampleEvery is the period of the WAL / dead tuple / backend samples.
	SampleEvery time.Duration
	// BystanderEvery is the period of the bystander query.
	BystanderEvery time.Duration
	// ProducerTxPerSec caps producer transactions per second (events are
	// batched into them).
	ProducerTxPerSec int
	// WarmupTimeout bounds the wait for the first tick (pg_cron 1.4 starts
	// the loop at the next minute boundary).
	WarmupTimeout time.Duration
	// KeepCluster leaves the cluster running at the end (for inspection).
	KeepCluster bool
	// Log receives progress lines; Progress (if non-nil) the progress bar.
	Log      *slog.Logger
	Progress io.Writer
}

func (c *Config) defaults() error {
	if len(c.Phases) == 0 {
		return fmt.Errorf("no phases: choose --profile quick or full")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PollInterval, time.Millisecond)
	def(&c.ListenFallback, 100*time.Millisecond)
	def(&c.SampleEvery, time.Second)
	def(&c.BystanderEvery, 50*time.Millisecond)
	def(&c.WarmupTimeout, 150*time.Second)
	if c.ProducerTxPerSec <= 0 {
		c.ProducerTxPerSec = 200
	}
	if c.StateDir == "" {
		c.StateDir = "/tmp/pgque-bench-subsecond"
	}
	if c.OutDir == "" {
		c.OutDir = "bench/sub-second/results/" + time.Now().Format("2006-01-02")
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	for i, p := range c.Phases {
		if p.Hz < 1 || p.Hz > 1000 {
			return fmt.Errorf("phase %s: hz %d out of 1..1000", p.Name, p.Hz)
		}
		if p.Queues <= 0 && p.Rate > 0 {
			c.Phases[i].Queues = 1
		}
		if p.Wake == "" {
			c.Phases[i].Wake = WakePoll
		}
		if p.System != SystemPgque && p.System != SystemPgQ {
			return fmt.Errorf("phase %s: unknown system %q", p.Name, p.System)
		}
	}
	return nil
}

// Profiles.
//
// The full cross product (4 rates × 3 workloads × 2 xmin × 2 wake × 3
// rotation × 2 systems = 288 cells) does not fit ~25 minutes; the full
// profile keeps the cells each target needs plus one step along each axis
// from the headline cell (100 Hz, 800 ev/s, xmin held, poll-only, derived
// rotation), which itself runs 10 minutes (ten pg_cron slot handovers).
func quickProfile() []Phase {
	return []Phase{
		{Name: "pgque-100hz-800-xmin-poll", System: SystemPgque, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Duration: 20 * time.Second},
		{Name: "pgque-100hz-idle-100q", System: SystemPgque, Hz: 100, Rate: 0, Queues: 100, Duration: 10 * time.Second},
		{Name: "pgq-100hz-800-xmin-poll", System: SystemPgQ, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Duration: 20 * time.Second},
	}
}

func fullProfile() []Phase {
	m := time.Minute
	s45 := 45 * time.Second
	return []Phase{
		// Headline: the latency / bloat / handover targets.
		{Name: "pgque-100hz-800-xmin-poll-10min", System: SystemPgque, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Duration: 10 * m},
		// WAL ratio 100 Hz vs 1 Hz at 800 ev/s (no xmin held), and 1000 Hz.
		{Name: "pgque-1hz-800-poll", System: SystemPgque, Hz: 1, Rate: 800, Wake: WakePoll, Duration: s45},
		{Name: "pgque-100hz-800-poll", System: SystemPgque, Hz: 100, Rate: 800, Wake: WakePoll, Duration: s45},
		{Name: "pgque-1000hz-800-poll", System: SystemPgque, Hz: 1000, Rate: 800, Wake: WakePoll, Duration: s45},
		// 10 Hz target, xmin held.
		{Name: "pgque-10hz-800-xmin-poll", System: SystemPgque, Hz: 10, Rate: 800, HeldXmin: true, Wake: WakePoll, Duration: s45},
		// One step along the other axes from the headline cell.
		{Name: "pgque-100hz-800-xmin-listen", System: SystemPgque, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakeListen, Duration: s45},
		{Name: "pgque-100hz-8000-xmin-poll", System: SystemPgque, Hz: 100, Rate: 8000, HeldXmin: true, Wake: WakePoll, Duration: s45},
		{Name: "pgque-100hz-800-xmin-poll-rot30s", System: SystemPgque, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Rotation: 30 * time.Second, Duration: s45},
		{Name: "pgque-100hz-800-xmin-poll-rot3s", System: SystemPgque, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Rotation: 3 * time.Second, Duration: s45},
		// Idle WAL: 100 idle queues vs none, both ticking at 100 Hz. Idle
		// queues tick once per ticker_idle_period (1 min): 2 min covers two.
		{Name: "pgque-100hz-idle-0q", System: SystemPgque, Hz: 100, Rate: 0, Queues: 0, Duration: m},
		{Name: "pgque-100hz-idle-100q", System: SystemPgque, Hz: 100, Rate: 0, Queues: 100, Duration: 2 * m},
		// Baseline: upstream PgQ + pgqd on the same cells.
		{Name: "pgq-100hz-800-xmin-poll", System: SystemPgQ, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Duration: 2 * m},
		{Name: "pgq-1hz-800-poll", System: SystemPgQ, Hz: 1, Rate: 800, Wake: WakePoll, Duration: s45},
		{Name: "pgq-100hz-800-poll", System: SystemPgQ, Hz: 100, Rate: 800, Wake: WakePoll, Duration: s45},
		{Name: "pgq-100hz-idle-100q", System: SystemPgQ, Hz: 100, Rate: 0, Queues: 100, Duration: 2 * m},
	}
}

// Profile returns a named phase list.
func Profile(name string) ([]Phase, error) {
	switch name {
	case "quick":
		return quickProfile(), nil
	case "full":
		return fullProfile(), nil
	}
	return nil, fmt.Errorf("unknown profile %q: use quick or full", name)
}
