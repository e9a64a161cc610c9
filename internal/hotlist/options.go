package hotlist

import (
	"log/slog"
	"time"
)

// Width chooses how many candidates one pop checks out.
type Width uint8

const (
	// WidthNarrow: k = clamp(partitions × 2, 2, 64), stopping early once
	// the checked-out entries' marks cover the batch. Queen's later choice:
	// wide check-outs starve concurrent pops on sparse rings.
	WidthNarrow Width = iota
	// WidthWide: k = clamp(partitions × 8, 16, 256), no early stop.
	WidthWide
)

// Clock is the time source; tests inject a fake one.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Options are every knob of the hot-list. Zero values take the defaults
// documented on each field (and in docs/reference/hotlist-config.md).
type Options struct {
	// Shards is the number of sub-rings per ring (index % Shards). Default 8.
	Shards int
	// Width is the check-out width policy. Default WidthNarrow.
	Width Width
	// ParkMax bounds how long a partition we took with a lease stays in the
	// wheel before it is looked at again (our own ack pulls it back
	// sooner). Default 1000 ms.
	ParkMax time.Duration
	// LeasedSlack is added to a leased verdict's Until (and to
	// delayedProcessing) before the revisit. Default 300 ms.
	LeasedSlack time.Duration
	// RevisitMin / RevisitMax bound the revisit of an `empty` verdict on a
	// deferral queue or for a freshly marked partition (doubling from Min
	// to Max). Defaults 50 ms / 1000 ms.
	RevisitMin, RevisitMax time.Duration
	// EmptyGrace: an `empty` verdict for a partition marked less than this
	// long ago is revisited (RevisitMin..Max) instead of cleared: a push is
	// marked before the tick that makes it visible to a pop. Deferral
	// queues add their delay and window. Default 2 s; negative disables.
	EmptyGrace time.Duration
	// ClaimsSeeMarks says the source's claims read a snapshot taken after
	// their check-out (pgque.pop_list closes a range at its own
	// pg_current_snapshot()), and a mark follows its transaction's commit:
	// so every mark made before a check-out is visible to that pop, and its
	// `empty` (or drained `took`) verdict for a partition last marked
	// before the check-out is final - cleared at once, no EmptyGrace
	// (queues with delayedProcessing or windowBuffer keep it). Without it a
	// mark may precede the tick that makes its message visible.
	// internal/hotlistpg sets it.
	ClaimsSeeMarks bool
	// WindowMarks releases a windowBuffer hold early after this many marks.
	// Default 100.
	WindowMarks int
	// WakeTick is the coalescing period of quiet wakes: the wake loop's
	// period while it has something to wake (it sleeps otherwise).
	// Default 5 ms.
	WakeTick time.Duration
	// ReseedInterval is the reseed floor per (queue, group). Default 30 s;
	// negative disables the periodic reseed (cold rings still reseed).
	ReseedInterval time.Duration
	// ReseedPhase is the window of a ring's random phase: its first
	// periodic reseed comes ReseedInterval after its cold reseed less the
	// phase (rings created together reseed apart).
	// Default 15 s.
	ReseedPhase time.Duration
	// ReseedPageSize and ReseedMaxPages bound one reseed. Defaults 10,000
	// and 200.
	ReseedPageSize, ReseedMaxPages int
	// ReseedConcurrency is how many reseeds the background loop runs at
	// once. Default 2.
	ReseedConcurrency int
	// StrandedAfter: an entry checked out longer than this is reclaimed by
	// the next reseed. Default ReseedInterval (30 s).
	StrandedAfter time.Duration
	// SweepInterval is the idle sweep period. Default 60 s; negative or
	// DisableSweep disables it.
	SweepInterval time.Duration
	DisableSweep  bool
	// HintSetMax bounds the outgoing peer hint set. Default 200,000.
	HintSetMax int
	// HintFlush is the period of the peer hint sender while hints are
	// pending (it sleeps otherwise). Default 5 ms.
	HintFlush time.Duration
	// HintBatch is the most hints per SendHints call. Default 500.
	HintBatch int
	// LogInterval is the period of the summary log line. Default 30 s;
	// negative disables it.
	LogInterval time.Duration
	// TopN is how many rings the summary line names. Default 5.
	TopN int
	// TracePrefix logs breadcrumbs (marks, check-outs, verdicts) for queues
	// whose name starts with it. "" = off.
	TracePrefix string

	Clock    Clock
	Logger   *slog.Logger
	Reseeder Reseeder
	Peers    PeerTransport
	// Rand returns a number in [0, n) for the reseed phase; default
	// math/rand/v2. Tests fix it. Must be safe for concurrent use.
	Rand func(n int64) int64
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defi := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	defi(&o.Shards, 8)
	def(&o.ParkMax, time.Second)
	def(&o.LeasedSlack, 300*time.Millisecond)
	def(&o.RevisitMin, 50*time.Millisecond)
	def(&o.RevisitMax, time.Second)
	def(&o.EmptyGrace, 2*time.Second)
	defi(&o.WindowMarks, 100)
	def(&o.WakeTick, 5*time.Millisecond)
	def(&o.ReseedInterval, 30*time.Second)
	def(&o.ReseedPhase, 15*time.Second)
	defi(&o.ReseedPageSize, 10000)
	defi(&o.ReseedMaxPages, 200)
	defi(&o.ReseedConcurrency, 2)
	def(&o.StrandedAfter, o.ReseedInterval)
	if o.StrandedAfter < 0 {
		o.StrandedAfter = 30 * time.Second
	}
	def(&o.SweepInterval, 60*time.Second)
	if o.SweepInterval < 0 {
		o.DisableSweep = true
	}
	defi(&o.HintSetMax, 200000)
	def(&o.HintFlush, 5*time.Millisecond)
	defi(&o.HintBatch, 500)
	def(&o.LogInterval, 30*time.Second)
	defi(&o.TopN, 5)
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

func clamp(v, lo, hi int) int {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

// width returns k for a pop claiming up to p partitions and whether to
// stop early once marks cover the batch.
func (o Options) width(p int) (k int, early bool) {
	if p < 1 {
		p = 1
	}
	if o.Width == WidthWide {
		return clamp(p*8, 16, 256), false
	}
	return clamp(p*2, 2, 64), true
}
