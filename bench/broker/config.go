package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Params are the sizes and durations of one profile's cells.
type Params struct {
	// LatencyRate is the open-loop producer's rate (messages/s, one message
	// per push request) of the latency cells; LatencyDuration their length.
	LatencyRate     int           `json:"latency_rate"`
	LatencyDuration time.Duration `json:"latency_duration"`
	// LatencyPartitions the producer spreads over; LatencyConsumers long-poll.
	LatencyPartitions int `json:"latency_partitions"`
	LatencyConsumers  int `json:"latency_consumers"`
	// LatencyDrain bounds the wait, after the producer stopped, for the
	// messages still unpopped (then counted missing).
	LatencyDrain time.Duration `json:"latency_drain"`
	// TwoBrokers adds a latency cell pushing through broker A and popping
	// through broker B (the LISTEN/NOTIFY wake).
	TwoBrokers bool `json:"two_brokers"`

	// Push throughput: Pushers concurrent clients, PushBatch items per push,
	// over PushPartitions partitions, for PushDuration.
	Pushers        int           `json:"pushers"`
	PushBatch      int           `json:"push_batch"`
	PushPartitions int           `json:"push_partitions"`
	PushDuration   time.Duration `json:"push_duration"`
	// Pop+ack throughput over the push cell's backlog: PopConsumers
	// clients popping PopBatch, for at most PopDuration (or until drained).
	// PopBacklog is the size of a second, fresh backlog popped the same way
	// (the push cell's backlog is as large as its throughput makes it).
	PopBacklog   int           `json:"pop_backlog"`
	PopConsumers int           `json:"pop_consumers"`
	PopBatch     int           `json:"pop_batch"`
	PopDuration  time.Duration `json:"pop_duration"`

	// Wildcard pop cells: a queue with each of HotPartitions partitions, 10
	// of them fed at HotRate messages/s, HotConsumers polling (wait=false),
	// for HotDuration, hot-list off then on.
	HotPartitions []int         `json:"hot_partitions"`
	HotRate       int           `json:"hot_rate"`
	HotConsumers  int           `json:"hot_consumers"`
	HotDuration   time.Duration `json:"hot_duration"`

	// Many consumers: ManyConsumers long-polling clients over ManyPartitions
	// partitions that hold ManyBacklog messages at the start and get
	// ManyRate messages/s meanwhile, for ManyDuration.
	ManyConsumers  int           `json:"many_consumers"`
	ManyPartitions int           `json:"many_partitions"`
	ManyBacklog    int           `json:"many_backlog"`
	ManyRate       int           `json:"many_rate"`
	ManyBatch      int           `json:"many_batch"`
	ManyDuration   time.Duration `json:"many_duration"`
}

// Config configures a run.
type Config struct {
	Profile string
	Params  Params
	// StateDir holds the benchmark's cluster, the built binary and the
	// brokers' logs (wiped first).
	StateDir string
	// OutDir receives results.json and report.md.
	OutDir string
	// Binary is a pgquectl binary; empty: built from ./cmd/pgquectl.
	Binary string
	// ServeFlags are appended to every `pgquectl serve` command line.
	ServeFlags []string
	// ClusterSettings override or add postgresql.conf lines of the
	// benchmark's cluster (name -> value as written in the file).
	ClusterSettings map[string]string
	// Ticker is the scheduled ticking beside the brokers: TickerDaemon
	// (default), TickerCron or TickerNone.
	Ticker string
	// StatementsTrack is pg_stat_statements.track: "top" (default) or
	// "all" (nested statements and planning time too).
	StatementsTrack string
	// Cells, when set, names the cells to run (a name or a name prefix
	// each); the others are listed as skipped.
	Cells []string
	// KeepCluster leaves the cluster running at the end.
	KeepCluster bool
	// ServePprof runs every serve with --pprof and records its CPU profile
	// during each latency cell (<OutDir>/<cell>-serve.pprof); ClientPprof
	// records the load client's (<OutDir>/<cell>-client.pprof).
	ServePprof, ClientPprof bool
	// TransactionIDs makes the latency cells' producer send a random
	// transactionId with every item, as Queen's JS client does.
	TransactionIDs bool
	// Command is the command line, for the report.
	Command []string
	Log     *slog.Logger
	// Stderr receives the load clients' errors.
	Stderr io.Writer
}

func quickParams() Params {
	s := 3 * time.Second
	return Params{
		LatencyRate: 1000, LatencyDuration: s, LatencyPartitions: 10, LatencyConsumers: 2, LatencyDrain: 2 * time.Second, TwoBrokers: true,
		Pushers: 8, PushBatch: 100, PushPartitions: 16, PushDuration: s,
		PopConsumers: 8, PopBatch: 100, PopDuration: s, PopBacklog: 5000,
		HotPartitions: []int{100, 1000}, HotRate: 200, HotConsumers: 4, HotDuration: s,
		ManyConsumers: 64, ManyPartitions: 1000, ManyBacklog: 10000, ManyRate: 1000, ManyBatch: 10, ManyDuration: s,
	}
}

func fullParams() Params {
	return Params{
		LatencyRate: 1000, LatencyDuration: time.Minute, LatencyPartitions: 10, LatencyConsumers: 2, LatencyDrain: 5 * time.Second, TwoBrokers: true,
		Pushers: 8, PushBatch: 100, PushPartitions: 16, PushDuration: 45 * time.Second,
		PopConsumers: 8, PopBatch: 100, PopDuration: 45 * time.Second, PopBacklog: 20000,
		HotPartitions: []int{100, 1000, 10000}, HotRate: 200, HotConsumers: 4, HotDuration: 30 * time.Second,
		ManyConsumers: 64, ManyPartitions: 1000, ManyBacklog: 30000, ManyRate: 2000, ManyBatch: 10, ManyDuration: 30 * time.Second,
	}
}

// Profile returns a named profile.
func Profile(name string) (Params, error) {
	switch name {
	case "quick":
		return quickParams(), nil
	case "full":
		return fullParams(), nil
	}
	return Params{}, fmt.Errorf("unknown profile %q: use quick or full", name)
}
