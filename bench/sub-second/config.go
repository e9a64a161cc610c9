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
	// SystemPgque020 is PgQue 0.2.0 (the nearest peer, pgque.sql in its own
	// database) ticked as its README says: set_tick_period_ms + start(), a
	// '1 second' pg_cron job; it needs pg_cron 1.5+.
	SystemPgque020 = "pgque-0.2.0"
)

// Clusters a phase can run on.
const (
	CronMain = ""    // the main cluster: Debian's pg_cron 1.4
	Cron16   = "1.6" // the pg_cron 1.6 cluster (Config.PgCron16BinDir)
)

// Producer arrival processes.
const (
	ArrivalsPaced   = ""        // a fixed schedule, events batched into ≤ ProducerTxPerSec transactions
	ArrivalsPoisson = "poisson" // one event per transaction, exponential gaps (a Poisson process)
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
	// Cron names the cluster: CronMain (pg_cron 1.4) or Cron16.
	Cron string `json:"pg_cron,omitempty"`
	// Arrivals is the producer's arrival process (ArrivalsPaced, ArrivalsPoisson).
	Arrivals string `json:"arrivals,omitempty"`
	// Consumers polling the active queue, each its own subscription
	// (latency is recorded by the first); default 1.
	Consumers int `json:"consumers,omitempty"`
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
	// PgCron16BinDir is the bin directory of a PostgreSQL 15 tree carrying
	// pg_cron 1.6 (env PGQUE_PGCRON16_BINDIR; scripts/pgcron16.sh builds
	// one). Empty: the Cron16 phases are skipped, with a note in the report.
	PgCron16BinDir string
	// PgQue020SQL is the path of PgQue 0.2.0's pgque.sql (env
	// PGQUE_PGQUE020_SQL). Empty: the PgQue 0.2.0 phases are skipped.
	PgQue020SQL string
	// KeepCluster leaves the cluster running at the end (for inspection).
	KeepCluster bool
	// Log receives progress lines; Progress (if non-nil) the progress bar.
	Log      *slog.Logger
	Progress io.Writer
}

func (c *Config) defaults() error {
	if len(c.Phases) == 0 {
		return fmt.Errorf("no phases: choose --profile quick, managed or full")
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
		if p.Consumers <= 0 {
			c.Phases[i].Consumers = 1
		}
		switch {
		case p.System != SystemPgque && p.System != SystemPgQ && p.System != SystemPgque020:
			return fmt.Errorf("phase %s: unknown system %q", p.Name, p.System)
		case p.System == SystemPgque020 && p.Cron != Cron16:
			return fmt.Errorf("phase %s: PgQue 0.2.0 needs pg_cron 1.5+: set Cron: Cron16", p.Name)
		case p.System == SystemPgQ && p.Cron != CronMain:
			return fmt.Errorf("phase %s: PgQ + pgqd runs on the main cluster only", p.Name)
		case p.Cron != CronMain && p.Cron != Cron16:
			return fmt.Errorf("phase %s: unknown pg_cron cluster %q", p.Name, p.Cron)
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
	s10 := 10 * time.Second
	return []Phase{
		// pg_cron 1.6 first (skipped without PGQUE_PGCRON16_BINDIR /
		// PGQUE_PGQUE020_SQL): they run while pg_cron 1.4 waits for its
		// first minute. The peer and us, same cell.
		{Name: "cron16-pgque-100hz-100poisson-xmin-poll", System: SystemPgque, Cron: Cron16, Hz: 100, Rate: 100, Arrivals: ArrivalsPoisson, HeldXmin: true, Wake: WakePoll, Duration: s10},
		{Name: "cron16-pgque020-100hz-100poisson-xmin-poll", System: SystemPgque020, Cron: Cron16, Hz: 100, Rate: 100, Arrivals: ArrivalsPoisson, HeldXmin: true, Wake: WakePoll, Duration: s10},
		{Name: "pgque-100hz-800-xmin-poll", System: SystemPgque, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Duration: s10},
		{Name: "pgque-100hz-idle-100q", System: SystemPgque, Hz: 100, Rate: 0, Queues: 100, Duration: s10},
		{Name: "pgque-100hz-800-xmin-16consumers", System: SystemPgque, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Consumers: 16, Duration: s10},
		{Name: "pgq-100hz-800-xmin-poll", System: SystemPgQ, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Duration: s10},
	}
}

func fullProfile() []Phase {
	m := time.Minute
	s45 := 45 * time.Second
	return []Phase{
		// pg_cron 1.6 (managed providers) first, while pg_cron 1.4 waits for
		// its first minute: our headline cell, then PgQue 0.2.0 and us on
		// the same Poisson cell.
		{Name: "cron16-pgque-100hz-800-xmin-poll", System: SystemPgque, Cron: Cron16, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Duration: 2 * m},
		{Name: "cron16-pgque-100hz-100poisson-xmin-poll", System: SystemPgque, Cron: Cron16, Hz: 100, Rate: 100, Arrivals: ArrivalsPoisson, HeldXmin: true, Wake: WakePoll, Duration: m},
		{Name: "cron16-pgque020-100hz-100poisson-xmin-poll", System: SystemPgque020, Cron: Cron16, Hz: 100, Rate: 100, Arrivals: ArrivalsPoisson, HeldXmin: true, Wake: WakePoll, Duration: m},
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
		// Rotation under many busy consumers: 16 subscriptions polling every 1 ms.
		{Name: "pgque-100hz-800-xmin-16consumers", System: SystemPgque, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Consumers: 16, Duration: m},
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

// managedProfile is the part of the full profile that answers the
// managed-provider questions in about 10 minutes: the pg_cron 1.6 cells
// (ours and PgQue 0.2.0 side by side), rotation under 16 busy consumers,
// and the WAL ratio 100 Hz / 1 Hz with PgQ beside it.
func managedProfile() []Phase {
	var out []Phase
	for _, p := range fullProfile() {
		switch {
		case p.Cron == Cron16, p.Consumers > 1,
			p.Rate == 800 && !p.HeldXmin && (p.Hz == 1 || p.Hz == 100):
			out = append(out, p)
		}
	}
	return out
}

// headlineProfile is the pg_cron 1.4 headline cell (100 Hz, 800 ev/s,
// xmin held, poll-only, derived rotation) for 3 minutes - three minute
// boundaries - and the same cell without the held xmin for 2 minutes (what
// the held xmin costs, in the same run): for comparing a change before and
// after on a shared machine (run both the same way, one after the other or
// side by side).
func headlineProfile() []Phase {
	return []Phase{
		{Name: "pgque-100hz-800-xmin-poll", System: SystemPgque, Hz: 100, Rate: 800, HeldXmin: true, Wake: WakePoll, Duration: 3 * time.Minute},
		{Name: "pgque-100hz-800-poll", System: SystemPgque, Hz: 100, Rate: 800, Wake: WakePoll, Duration: 2 * time.Minute},
	}
}

// walProfile is the part of the full profile that measures WAL only: the
// ratio pair (1 Hz and 100 Hz at 800 ev/s, no xmin held) and the idle pair
// (100 Hz, no queues and 100 idle queues), about 6 minutes; WAL bytes do
// not depend on timing, so it may run on a shared machine.
func walProfile() []Phase {
	var out []Phase
	for _, p := range fullProfile() {
		if p.System == SystemPgque && p.Cron != Cron16 && !p.HeldXmin &&
			(p.Rate == 0 || p.Rate == 800 && p.Hz <= 100) {
			out = append(out, p)
		}
	}
	return out
}

// Profile returns a named phase list.
func Profile(name string) ([]Phase, error) {
	switch name {
	case "headline":
		return headlineProfile(), nil
	case "quick":
		return quickProfile(), nil
	case "full":
		return fullProfile(), nil
	case "managed":
		return managedProfile(), nil
	case "wal":
		return walProfile(), nil
	}
	return nil, fmt.Errorf("unknown profile %q: use quick, headline, managed, wal or full", name)
}
