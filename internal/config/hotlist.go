package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/pgquectl/pgquectl/internal/hotlist"
)

// Hotlist lists the hot-list's tunables: config-file keys (and PGQUE_…
// environment variables), not flags - `pgquectl serve` has only the
// on/off switch --hotlist. Defaults are hotlist's Default… constants;
// docs/reference/hotlist-config.md is generated from this list
// (go run ./scripts/genconfig).
var Hotlist = []Tunable{
	hotlistWidth,
	intTunable{Key: Key[int]{Name: "hotlist-shards", Default: hotlist.DefaultShards,
		Help: "sub-rings per (queue, group) ring, each with its own lock"},
		min: 1, max: 1024, set: func(o *hotlist.Options, v int) { o.Shards = v }},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-reseed-interval", Default: hotlist.DefaultReseedInterval,
		Help: "reseed floor per (queue, group): how soon work the hot-list missed (events from plain SQL producers, a lost hint) is found; 0 = only cold rings reseed"},
		min: time.Second, zeroOff: true, set: func(o *hotlist.Options, v time.Duration) { o.ReseedInterval = v }},
	intTunable{Key: Key[int]{Name: "hotlist-reseed-page-size", Default: hotlist.DefaultReseedPageSize,
		Help: "partitions per reseed keyset page"},
		min: 1, set: func(o *hotlist.Options, v int) { o.ReseedPageSize = v }},
	intTunable{Key: Key[int]{Name: "hotlist-reseed-max-pages", Default: hotlist.DefaultReseedMaxPages,
		Help: "page cap of one reseed"},
		min: 1, set: func(o *hotlist.Options, v int) { o.ReseedMaxPages = v }},
	intTunable{Key: Key[int]{Name: "hotlist-reseed-concurrency", Default: hotlist.DefaultReseedConcurrency,
		Help: "reseeds the background loop runs at once"},
		min: 1, set: func(o *hotlist.Options, v int) { o.ReseedConcurrency = v }},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-sweep-interval", Default: hotlist.DefaultSweepInterval,
		Help: "idle sweep period (an idle queue is forgotten after about two); 0 = never sweep"},
		min: 10 * time.Millisecond, zeroOff: true, set: func(o *hotlist.Options, v time.Duration) {
			o.SweepInterval = v
			o.DisableSweep = v < 0
		}},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-empty-grace", Default: hotlist.DefaultEmptyGrace,
		Help: "an empty verdict this soon after a push, commit, replay or peer mark revisits instead of clearing, on queues with delayedProcessing or windowBuffer only (elsewhere a pop checked out after the mark sees it); a reseed row gets no grace; 0 = clear at once"},
		zeroOff: true, set: func(o *hotlist.Options, v time.Duration) { o.EmptyGrace = v }},
	intTunable{Key: Key[int]{Name: "hotlist-hint-set-max", Default: hotlist.DefaultHintSetMax,
		Help: "bound of the outgoing peer hint set (beyond it hints drop; peers heal at their reseed)"},
		min: 1, set: func(o *hotlist.Options, v int) { o.HintSetMax = v }},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-log-interval", Default: hotlist.DefaultLogInterval,
		Help: "period of the summary log line; 0 = no log line"},
		min: time.Second, zeroOff: true, set: func(o *hotlist.Options, v time.Duration) { o.LogInterval = v }},
	strTunable{Key: Key[string]{Name: "hotlist-trace",
		Help: "log breadcrumbs (marks, check-outs, verdicts, acks, reseeds) of queues whose name starts with this prefix; empty = off"},
		set: func(o *hotlist.Options, v string) error { o.TracePrefix = v; return nil }},
}

// HotlistFixed are the hot-list's former tunables that no user has a reason
// to turn: the CLI no longer sets them (hotlist.Options keeps its
// defaults). Setting one - former flag, environment or config file - is an
// error naming it, so an old setting is not silently ignored.
var HotlistFixed = []Tunable{
	durTunable{Key: Key[time.Duration]{Name: "hotlist-reseed-phase", Default: hotlist.DefaultReseedPhase,
		Help: "window of a ring's random phase: its first periodic reseed comes one interval after its cold reseed less the phase (rings created together reseed apart)"}},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-stranded-after",
		Help: "a check-out older than this is reclaimed by the next reseed (with the periodic reseed off: the reseed interval's default)"},
		doc: "the reseed interval"},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-park-max", Default: hotlist.DefaultParkMax,
		Help: "longest park of a partition we claimed with a lease (our own ack pulls it back sooner)"}},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-leased-slack", Default: hotlist.DefaultLeasedSlack,
		Help: "added to a leased verdict's revisit time and to delayedProcessing"}},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-revisit-min", Default: hotlist.DefaultRevisitMin,
		Help: "first revisit of an empty verdict that may not clear yet, doubling up to the longest"}},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-revisit-max", Default: hotlist.DefaultRevisitMax,
		Help: "longest revisit of an empty verdict that may not clear yet"}},
	intTunable{Key: Key[int]{Name: "hotlist-window-marks", Default: hotlist.DefaultWindowMarks,
		Help: "marks that release a windowBuffer hold early"}},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-wake-tick", Default: hotlist.DefaultWakeTick,
		Help: "coalescing period of quiet wakes: the wake loop's period while it has something to wake"}},
	durTunable{Key: Key[time.Duration]{Name: "hotlist-hint-flush", Default: hotlist.DefaultHintFlush,
		Help: "peer hint sender period while hints are pending"}},
	intTunable{Key: Key[int]{Name: "hotlist-hint-batch", Default: hotlist.DefaultHintBatch,
		Help: "most hints per send"}},
	intTunable{Key: Key[int]{Name: "hotlist-top", Default: hotlist.DefaultTopN,
		Help: "rings named in the summary log line"}},
}

var hotlistWidth = strTunable{Key: Key[string]{Name: "hotlist-width", Default: hotlist.DefaultWidth.String(),
	Help: fmt.Sprintf("check-out width: %s = %s, stopping once the candidates' marks cover the batch; %s = %s, no early stop",
		hotlist.WidthNarrow, hotlist.WidthNarrow.Rule(), hotlist.WidthWide, hotlist.WidthWide.Rule())},
	set: func(o *hotlist.Options, v string) (err error) { o.Width, err = hotlist.ParseWidth(v); return err }}

// HotlistOptions reads the hot-list's tunables from s (defaults where s has
// none) and checks them. A 0 that means "off" maps to the hotlist.Options
// spelling (negative, or DisableSweep).
func HotlistOptions(s Source) (hotlist.Options, error) {
	var o hotlist.Options
	var errs []error
	for _, t := range Hotlist {
		if err := t.apply(s, &o); err != nil {
			errs = append(errs, err)
		}
	}
	for _, t := range HotlistFixed {
		if s.IsSet(t.Name()) {
			errs = append(errs, fmt.Errorf("%s is no longer a setting: the hot-list uses %s; remove it from the config file and the environment (%s)", t.Name(), t.DefaultText(), t.Env()))
		}
	}
	return o, errors.Join(errs...)
}

// Tunable is a setting read from the config file and the environment only.
type Tunable interface {
	// Name is the config-file key.
	Name() string
	// Env is the environment variable.
	Env() string
	// DefaultText is the default as a config file spells it.
	DefaultText() string
	// Help says what it does.
	Help() string
	apply(s Source, o *hotlist.Options) error
}

type intTunable struct {
	Key[int]
	min, max int // max 0: none
	set      func(*hotlist.Options, int)
}

func (t intTunable) Name() string        { return t.Key.Name }
func (t intTunable) Help() string        { return t.Key.Help }
func (t intTunable) DefaultText() string { return FormatValue(t.Default) }

func (t intTunable) apply(s Source, o *hotlist.Options) error {
	v, err := t.Lookup(s)
	switch {
	case err != nil:
		return err
	case v < t.min:
		return fmt.Errorf("%s must be at least %d (got %d)", t.Key.Name, t.min, v)
	case t.max > 0 && v > t.max:
		return fmt.Errorf("%s must be at most %d (got %d)", t.Key.Name, t.max, v)
	}
	t.set(o, v)
	return nil
}

type durTunable struct {
	Key[time.Duration]
	min     time.Duration
	zeroOff bool // 0 switches it off: negative in hotlist.Options
	set     func(*hotlist.Options, time.Duration)
	doc     string // the default in words, when it is derived
}

func (t durTunable) Name() string { return t.Key.Name }
func (t durTunable) Help() string { return t.Key.Help }
func (t durTunable) DefaultText() string {
	if t.doc != "" {
		return t.doc
	}
	return FormatValue(t.Default)
}

func (t durTunable) apply(s Source, o *hotlist.Options) error {
	v, err := t.Lookup(s)
	switch {
	case err != nil:
		return err
	case v < 0:
		return fmt.Errorf("%s must not be negative (got %s)", t.Key.Name, v)
	case v == 0 && t.zeroOff:
		v = -1
	case v < t.min:
		return fmt.Errorf("%s must be at least %s (got %s)", t.Key.Name, t.min, v)
	}
	t.set(o, v)
	return nil
}

type strTunable struct {
	Key[string]
	set func(*hotlist.Options, string) error
}

func (t strTunable) Name() string        { return t.Key.Name }
func (t strTunable) Help() string        { return t.Key.Help }
func (t strTunable) DefaultText() string { return t.Default }

func (t strTunable) apply(s Source, o *hotlist.Options) error {
	v, err := t.Lookup(s)
	if err != nil {
		return err
	}
	if err := t.set(o, v); err != nil {
		return fmt.Errorf("%s: %w", t.Key.Name, err)
	}
	return nil
}
