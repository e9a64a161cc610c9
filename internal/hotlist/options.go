package hotlist

import (
	"cmp"
	"fmt"
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

// The check-out width policies: k = clamp(partitions × per, min, max).
var widthRules = [...]struct{ per, min, max int }{
	WidthNarrow: {2, 2, 64},
	WidthWide:   {8, 16, 256},
}

// rule is w's clamp; any value but WidthWide is narrow.
func (w Width) rule() struct{ per, min, max int } {
	if w == WidthWide {
		return widthRules[WidthWide]
	}
	return widthRules[WidthNarrow]
}

// String is the width's name in the configuration: narrow or wide.
func (w Width) String() string {
	if w == WidthWide {
		return "wide"
	}
	return "narrow"
}

// Rule describes the width's k, e.g. "clamp(partitions × 2, 2, 64)".
func (w Width) Rule() string {
	r := w.rule()
	return fmt.Sprintf("clamp(partitions × %d, %d, %d)", r.per, r.min, r.max)
}

// ParseWidth reads a width's name (narrow or wide).
func ParseWidth(s string) (Width, error) {
	for _, w := range []Width{WidthNarrow, WidthWide} {
		if s == w.String() {
			return w, nil
		}
	}
	return 0, fmt.Errorf("%q: use %s or %s", s, WidthNarrow, WidthWide)
}

// Clock is the time source; tests inject a fake one.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// The defaults of Options: the one place each is written. The CLI's
// configuration keys, their help and the reference table
// (docs/reference/hotlist-config.md) are built from these.
const (
	DefaultShards            = 8
	DefaultWidth             = WidthNarrow
	DefaultParkMax           = time.Second
	DefaultLeasedSlack       = 300 * time.Millisecond
	DefaultRevisitMin        = 50 * time.Millisecond
	DefaultRevisitMax        = time.Second
	DefaultEmptyGrace        = 2 * time.Second
	DefaultWindowMarks       = 100
	DefaultWakeTick          = 5 * time.Millisecond
	DefaultReseedInterval    = 30 * time.Second
	DefaultReseedPhase       = 15 * time.Second
	DefaultReseedPageSize    = 10000
	DefaultReseedMaxPages    = 200
	DefaultReseedConcurrency = 2
	DefaultSweepInterval     = 60 * time.Second
	DefaultHintSetMax        = 200000
	DefaultHintFlush         = 5 * time.Millisecond
	DefaultHintBatch         = 500
	DefaultLogInterval       = 30 * time.Second
	DefaultTopN              = 5
)

// Options are every knob of the hot-list. Zero values take the Default…
// constants above (ints: any value below 1).
type Options struct {
	// Shards is the number of sub-rings per ring (index % Shards).
	Shards int
	// Width is the check-out width policy.
	Width Width
	// ParkMax bounds how long a partition we took with a lease stays in the
	// wheel before it is looked at again (our own ack pulls it back
	// sooner).
	ParkMax time.Duration
	// LeasedSlack is added to a leased verdict's Until (and to
	// delayedProcessing) before the revisit.
	LeasedSlack time.Duration
	// RevisitMin / RevisitMax bound the revisit of an `empty` verdict on a
	// deferral queue or for a freshly marked partition (doubling from Min
	// to Max).
	RevisitMin, RevisitMax time.Duration
	// EmptyGrace: an `empty` verdict for a partition marked less than this
	// long ago is revisited (RevisitMin..Max) instead of cleared: a push is
	// marked before the tick that makes it visible to a pop. Deferral
	// queues add their delay and window. Negative disables.
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
	WindowMarks int
	// WakeTick is the coalescing period of quiet wakes: the wake loop's
	// period while it has something to wake (it sleeps otherwise).
	WakeTick time.Duration
	// ReseedInterval is the reseed floor per (queue, group); negative
	// disables the periodic reseed (cold rings still reseed).
	ReseedInterval time.Duration
	// ReseedPhase is the window of a ring's random phase: its first
	// periodic reseed comes ReseedInterval after its cold reseed less the
	// phase (rings created together reseed apart).
	ReseedPhase time.Duration
	// ReseedPageSize and ReseedMaxPages bound one reseed.
	ReseedPageSize, ReseedMaxPages int
	// ReseedConcurrency is how many reseeds the background loop runs at
	// once.
	ReseedConcurrency int
	// StrandedAfter: an entry checked out longer than this is reclaimed by
	// the next reseed. Default: ReseedInterval, or DefaultReseedInterval
	// when the periodic reseed is off.
	StrandedAfter time.Duration
	// SweepInterval is the idle sweep period; negative or DisableSweep
	// disables it.
	SweepInterval time.Duration
	DisableSweep  bool
	// HintSetMax bounds the outgoing peer hint set.
	HintSetMax int
	// HintFlush is the period of the peer hint sender while hints are
	// pending (it sleeps otherwise).
	HintFlush time.Duration
	// HintBatch is the most hints per SendHints call.
	HintBatch int
	// LogInterval is the period of the summary log line; negative disables
	// it.
	LogInterval time.Duration
	// TopN is how many rings the summary line names.
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

// positiveOr returns v, or def when v is below 1.
func positiveOr(v, def int) int {
	if v < 1 {
		return def
	}
	return v
}

// withDefaults fills every zero knob from the Default… constants. A
// negative duration is kept: it means "off" where the field says so.
func (o Options) withDefaults() Options {
	o.Shards = positiveOr(o.Shards, DefaultShards)
	o.ParkMax = cmp.Or(o.ParkMax, DefaultParkMax)
	o.LeasedSlack = cmp.Or(o.LeasedSlack, DefaultLeasedSlack)
	o.RevisitMin = cmp.Or(o.RevisitMin, DefaultRevisitMin)
	o.RevisitMax = cmp.Or(o.RevisitMax, DefaultRevisitMax)
	o.EmptyGrace = cmp.Or(o.EmptyGrace, DefaultEmptyGrace)
	o.WindowMarks = positiveOr(o.WindowMarks, DefaultWindowMarks)
	o.WakeTick = cmp.Or(o.WakeTick, DefaultWakeTick)
	o.ReseedInterval = cmp.Or(o.ReseedInterval, DefaultReseedInterval)
	o.ReseedPhase = cmp.Or(o.ReseedPhase, DefaultReseedPhase)
	o.ReseedPageSize = positiveOr(o.ReseedPageSize, DefaultReseedPageSize)
	o.ReseedMaxPages = positiveOr(o.ReseedMaxPages, DefaultReseedMaxPages)
	o.ReseedConcurrency = positiveOr(o.ReseedConcurrency, DefaultReseedConcurrency)
	o.StrandedAfter = cmp.Or(o.StrandedAfter, o.ReseedInterval)
	if o.StrandedAfter < 0 {
		o.StrandedAfter = DefaultReseedInterval
	}
	o.SweepInterval = cmp.Or(o.SweepInterval, DefaultSweepInterval)
	if o.SweepInterval < 0 {
		o.DisableSweep = true
	}
	o.HintSetMax = positiveOr(o.HintSetMax, DefaultHintSetMax)
	o.HintFlush = cmp.Or(o.HintFlush, DefaultHintFlush)
	o.HintBatch = positiveOr(o.HintBatch, DefaultHintBatch)
	o.LogInterval = cmp.Or(o.LogInterval, DefaultLogInterval)
	o.TopN = positiveOr(o.TopN, DefaultTopN)
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
	r := o.Width.rule()
	return clamp(p*r.per, r.min, r.max), o.Width != WidthWide
}
