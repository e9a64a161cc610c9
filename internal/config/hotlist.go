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
	intTunable{Key[int]{"hotlist-shards", "", hotlist.DefaultShards,
		"sub-rings per (queue, group) ring, each with its own lock"},
		1, 1024, func(o *hotlist.Options, v int) { o.Shards = v }},
	durTunable{Key[time.Duration]{"hotlist-reseed-interval", "", hotlist.DefaultReseedInterval,
		"reseed floor per (queue, group): how soon work the hot-list missed (events from plain SQL producers, a lost hint) is found; 0 = only cold rings reseed"},
		time.Second, true, func(o *hotlist.Options, v time.Duration) { o.ReseedInterval = v }},
	durTunable{Key[time.Duration]{"hotlist-reseed-phase", "", hotlist.DefaultReseedPhase,
		"window of a ring's random phase: its first periodic reseed comes one interval after its cold reseed less the phase (rings created together reseed apart)"},
		0, false, func(o *hotlist.Options, v time.Duration) { o.ReseedPhase = v }},
	intTunable{Key[int]{"hotlist-reseed-page-size", "", hotlist.DefaultReseedPageSize,
		"partitions per reseed keyset page"},
		1, 0, func(o *hotlist.Options, v int) { o.ReseedPageSize = v }},
	intTunable{Key[int]{"hotlist-reseed-max-pages", "", hotlist.DefaultReseedMaxPages,
		"page cap of one reseed"},
		1, 0, func(o *hotlist.Options, v int) { o.ReseedMaxPages = v }},
	intTunable{Key[int]{"hotlist-reseed-concurrency", "", hotlist.DefaultReseedConcurrency,
		"reseeds the background loop runs at once"},
		1, 0, func(o *hotlist.Options, v int) { o.ReseedConcurrency = v }},
	durTunable{Key[time.Duration]{"hotlist-stranded-after", "", 0,
		"a check-out older than this is reclaimed by the next reseed; 0 = the reseed interval"},
		0, false, func(o *hotlist.Options, v time.Duration) { o.StrandedAfter = v }},
	durTunable{Key[time.Duration]{"hotlist-sweep-interval", "", hotlist.DefaultSweepInterval,
		"idle sweep period (an idle queue is forgotten after about two); 0 = never sweep"},
		10 * time.Millisecond, true, func(o *hotlist.Options, v time.Duration) {
			o.SweepInterval = v
			o.DisableSweep = v < 0
		}},
	durTunable{Key[time.Duration]{"hotlist-park-max", "", hotlist.DefaultParkMax,
		"longest park of a partition we claimed with a lease (our own ack pulls it back sooner)"},
		time.Millisecond, false, func(o *hotlist.Options, v time.Duration) { o.ParkMax = v }},
	durTunable{Key[time.Duration]{"hotlist-leased-slack", "", hotlist.DefaultLeasedSlack,
		"added to a leased verdict's revisit time and to delayedProcessing"},
		0, false, func(o *hotlist.Options, v time.Duration) { o.LeasedSlack = v }},
	durTunable{Key[time.Duration]{"hotlist-revisit-min", "", hotlist.DefaultRevisitMin,
		"first revisit of an empty verdict that may not clear yet (doubling up to hotlist-revisit-max)"},
		time.Millisecond, false, func(o *hotlist.Options, v time.Duration) { o.RevisitMin = v }},
	durTunable{Key[time.Duration]{"hotlist-revisit-max", "", hotlist.DefaultRevisitMax,
		"longest revisit of an empty verdict that may not clear yet; at least hotlist-revisit-min"},
		time.Millisecond, false, func(o *hotlist.Options, v time.Duration) { o.RevisitMax = v }},
	durTunable{Key[time.Duration]{"hotlist-empty-grace", "", hotlist.DefaultEmptyGrace,
		"an empty verdict this soon after a push, commit, replay or peer mark revisits instead of clearing, on queues with delayedProcessing or windowBuffer only (elsewhere a pop checked out after the mark sees it); a reseed row gets no grace; 0 = clear at once"},
		0, true, func(o *hotlist.Options, v time.Duration) { o.EmptyGrace = v }},
	intTunable{Key[int]{"hotlist-window-marks", "", hotlist.DefaultWindowMarks,
		"marks that release a windowBuffer hold early"},
		1, 0, func(o *hotlist.Options, v int) { o.WindowMarks = v }},
	durTunable{Key[time.Duration]{"hotlist-wake-tick", "", hotlist.DefaultWakeTick,
		"coalescing period of quiet wakes: the wake loop's period while it has something to wake"},
		time.Millisecond, false, func(o *hotlist.Options, v time.Duration) { o.WakeTick = v }},
	intTunable{Key[int]{"hotlist-hint-set-max", "", hotlist.DefaultHintSetMax,
		"bound of the outgoing peer hint set (beyond it hints drop; peers heal at their reseed)"},
		1, 0, func(o *hotlist.Options, v int) { o.HintSetMax = v }},
	durTunable{Key[time.Duration]{"hotlist-hint-flush", "", hotlist.DefaultHintFlush,
		"peer hint sender period while hints are pending"},
		time.Millisecond, false, func(o *hotlist.Options, v time.Duration) { o.HintFlush = v }},
	intTunable{Key[int]{"hotlist-hint-batch", "", hotlist.DefaultHintBatch,
		"most hints per send"},
		1, 0, func(o *hotlist.Options, v int) { o.HintBatch = v }},
	durTunable{Key[time.Duration]{"hotlist-log-interval", "", hotlist.DefaultLogInterval,
		"period of the summary log line; 0 = no log line"},
		time.Second, true, func(o *hotlist.Options, v time.Duration) { o.LogInterval = v }},
	intTunable{Key[int]{"hotlist-top", "", hotlist.DefaultTopN,
		"rings named in the summary log line"},
		1, 0, func(o *hotlist.Options, v int) { o.TopN = v }},
	strTunable{Key[string]{"hotlist-trace", "", "",
		"log breadcrumbs (marks, check-outs, verdicts, acks, reseeds) of queues whose name starts with this prefix; empty = off"},
		func(o *hotlist.Options, v string) error { o.TracePrefix = v; return nil }},
}

var hotlistWidth = strTunable{Key[string]{"hotlist-width", "", hotlist.DefaultWidth.String(),
	fmt.Sprintf("check-out width: %s = %s, stopping once the candidates' marks cover the batch; %s = %s, no early stop",
		hotlist.WidthNarrow, hotlist.WidthNarrow.Rule(), hotlist.WidthWide, hotlist.WidthWide.Rule())},
	func(o *hotlist.Options, v string) (err error) { o.Width, err = hotlist.ParseWidth(v); return err }}

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
	if len(errs) == 0 && o.RevisitMax < o.RevisitMin {
		errs = append(errs, fmt.Errorf("hotlist-revisit-max (%s) must be at least hotlist-revisit-min (%s)", o.RevisitMax, o.RevisitMin))
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
}

func (t durTunable) Name() string        { return t.Key.Name }
func (t durTunable) Help() string        { return t.Key.Help }
func (t durTunable) DefaultText() string { return FormatValue(t.Default) }

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
