package main

import (
	"math"
	"sort"
	"time"
)

const (
	fileJSON   = "results.json"
	fileReport = "report.md"
)

// Cell statuses.
const (
	StatusMeasured     = "measured"
	StatusNotAvailable = "not available in this build"
	StatusFailed       = "failed"
	StatusSkipped      = "skipped"
)

// Dist summarises durations in milliseconds.
type Dist struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func summarize(ms []float64) *Dist {
	if len(ms) == 0 {
		return &Dist{}
	}
	s := append([]float64(nil), ms...)
	sort.Float64s(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return round3(s[max(0, min(i, len(s)-1))])
	}
	return &Dist{Count: len(s), Mean: round3(sum / float64(len(s))), P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: round3(s[len(s)-1])}
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func msSince(t time.Time) float64 { return float64(time.Since(t)) / float64(time.Millisecond) }

// StmtStats is pg_stat_statements summed over one class of statements.
type StmtStats struct {
	Calls   int64   `json:"calls"`
	TotalMs float64 `json:"total_ms"`
}

// Cell is one measurement.
type Cell struct {
	Name       string  `json:"name"`
	Kind       string  `json:"kind"` // latency, push, popack, wildcard, consumers
	Hotlist    string  `json:"hotlist"`
	Brokers    int     `json:"brokers"`
	Partitions int     `json:"partitions"`
	Consumers  int     `json:"consumers,omitempty"`
	Status     string  `json:"status"`
	Error      string  `json:"error,omitempty"`
	Seconds    float64 `json:"seconds"`

	Pushed      int64   `json:"pushed"`
	Consumed    int64   `json:"consumed"`
	PushRate    float64 `json:"push_msgs_per_sec,omitempty"`
	ConsumeRate float64 `json:"consumed_msgs_per_sec,omitempty"`
	Pops        int64   `json:"pops,omitempty"`
	PopsWithMsg int64   `json:"pops_with_messages,omitempty"`
	PopsPerSec  float64 `json:"pops_per_sec,omitempty"`
	Errors      int64   `json:"errors"`

	// Latency cells: push acknowledged (HTTP 201 received) → message
	// popped, and push sent → popped, per message.
	Latency     *Dist `json:"push_ack_to_pop,omitempty"`
	SendLatency *Dist `json:"push_send_to_pop,omitempty"`
	// BeforeAck counts messages popped before their push's answer arrived
	// (latency 0 in Latency).
	BeforeAck  int64 `json:"popped_before_push_answer,omitempty"`
	Missing    int64 `json:"missing,omitempty"`
	Duplicates int64 `json:"duplicates,omitempty"`
	Late       int64 `json:"producer_late,omitempty"`
	// Request durations.
	PushRequest *Dist `json:"push_request,omitempty"`
	PopRequest  *Dist `json:"pop_request,omitempty"`
	// Steps of the latency cells, from the broker's Server-Timing: a
	// push's database call ("push_db"); a pop's database calls ("pop_db",
	// pops that returned messages) and its time parked ("pop_park"); the
	// ack requests ("ack").
	Steps map[string]*Dist `json:"steps,omitempty"`

	WALBytes       int64                 `json:"wal_bytes"`
	WALPerPushed   float64               `json:"wal_bytes_per_msg_pushed,omitempty"`
	WALPerConsumed float64               `json:"wal_bytes_per_msg_consumed,omitempty"`
	Statements     map[string]*StmtStats `json:"statements,omitempty"`
	// PGPopMsPerPop is pg_stat_statements' time of the pop statements
	// (pop_any, pop_list, group_reseed, ...) over the HTTP pops served.
	PGPopMsPerPop float64 `json:"pg_pop_ms_per_pop,omitempty"`
	// PGReseedMsPerPop is the part of PGPopMsPerPop spent in the hot-list's
	// reseed scans (group_reseed).
	PGReseedMsPerPop float64 `json:"pg_reseed_ms_per_pop,omitempty"`
	// CPU is the CPU the cell used by process group (cpu.go).
	CPU *CPUUse `json:"cpu,omitempty"`
	// Profiles are the CPU profiles recorded during the cell (files in the
	// output directory: --serve-pprof, --client-pprof).
	Profiles []string `json:"profiles,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// Target is one goal with its verdict.
type Target struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Status string `json:"status"` // met, MISSED, not available in this build, not measured
}

// Machine describes where the run happened.
type Machine struct {
	NProc      int        `json:"nproc"`
	MemTotalKB int64      `json:"mem_total_kb"`
	Kernel     string     `json:"kernel"`
	GoVersion  string     `json:"go_version"`
	PostgreSQL string     `json:"postgresql"`
	Commit     string     `json:"commit"`
	LoadStart  [3]float64 `json:"loadavg_start"`
	LoadEnd    [3]float64 `json:"loadavg_end"`
}

// Results is everything a run wrote.
type Results struct {
	Command        []string          `json:"command"`
	Profile        string            `json:"profile"`
	Params         Params            `json:"params"`
	ServeFlags     []string          `json:"serve_flags"`
	Ticker         string            `json:"ticker"`
	TransactionIDs bool              `json:"transaction_ids,omitempty"`
	HotlistSwitch  bool              `json:"hotlist_switch_available"`
	Settings       map[string]string `json:"cluster_settings"`
	Started        time.Time         `json:"started"`
	Finished       time.Time         `json:"finished"`
	Machine        Machine           `json:"machine"`
	Cells          []*Cell           `json:"cells"`
	Targets        []Target          `json:"targets"`
	Interrupted    bool              `json:"interrupted,omitempty"`
	FailedCells    int               `json:"failed_cells"`
	BrokerLogLines []string          `json:"broker_log_warnings,omitempty"`
	// StatementGroups is the grouping of the cells' statements
	// (statementGroups); 0 in a results.json written before it was kept.
	StatementGroups int `json:"statement_groups,omitempty"`
}
