package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/pgquectl/pgquectl/internal/hotlist"
)

// addHotlistFlags declares serve's hot-list switch and knobs (each also
// PGQUE_HOTLIST_… in the environment and hotlist-… in the config file).
// Defaults are hotlist.Options' (docs/reference/hotlist-config.md).
func addHotlistFlags(f *pflag.FlagSet) {
	f.Bool("hotlist", true, "answer wildcard pops from the in-memory hot-list; false: the SQL candidate scan on every pop")
	f.Int("hotlist-shards", 8, "hot-list: sub-rings per (queue, group) ring")
	f.String("hotlist-width", "narrow", "hot-list check-out width: narrow = clamp(partitions×2, 2, 64) with early stop, wide = clamp(partitions×8, 16, 256)")
	f.Duration("hotlist-reseed-interval", 30*time.Second, "hot-list: reseed floor per (queue, group); 0 = only cold rings reseed")
	f.Duration("hotlist-reseed-phase", 15*time.Second, "hot-list: window of a ring's random phase (its first periodic reseed: one interval after its cold reseed less the phase)")
	f.Int("hotlist-reseed-page-size", 10000, "hot-list: partitions per reseed keyset page")
	f.Int("hotlist-reseed-max-pages", 200, "hot-list: page cap of one reseed")
	f.Int("hotlist-reseed-concurrency", 2, "hot-list: reseeds the background loop runs at once")
	f.Duration("hotlist-stranded-after", 0, "hot-list: a check-out older than this is reclaimed by the next reseed (0 = the reseed interval)")
	f.Duration("hotlist-sweep-interval", 60*time.Second, "hot-list: idle sweep period (idle queues are forgotten after about two); 0 = never sweep")
	f.Duration("hotlist-park-max", time.Second, "hot-list: longest park of a partition we claimed with a lease")
	f.Duration("hotlist-leased-slack", 300*time.Millisecond, "hot-list: added to a leased verdict's revisit time and to delayedProcessing")
	f.Duration("hotlist-revisit-min", 50*time.Millisecond, "hot-list: first revisit of an empty verdict that may not clear yet")
	f.Duration("hotlist-revisit-max", time.Second, "hot-list: longest revisit of an empty verdict that may not clear yet")
	f.Duration("hotlist-empty-grace", 2*time.Second, "hot-list: an empty verdict this soon after a mark revisits instead of clearing; 0 = clear at once")
	f.Int("hotlist-window-marks", 100, "hot-list: marks that release a windowBuffer hold early")
	f.Duration("hotlist-wake-tick", 5*time.Millisecond, "hot-list: coalescing period of quiet wakes")
	f.Int("hotlist-hint-set-max", 200000, "hot-list: bound of the outgoing peer hint set (beyond it hints drop; peers heal at their reseed)")
	f.Duration("hotlist-hint-flush", 5*time.Millisecond, "hot-list: peer hint sender period")
	f.Int("hotlist-hint-batch", 500, "hot-list: most hints per send")
	f.Duration("hotlist-log-interval", 30*time.Second, "hot-list: period of the summary log line; 0 = no log line")
	f.Int("hotlist-top", 5, "hot-list: rings named in the summary log line")
	f.String("hotlist-trace", "", "hot-list: log breadcrumbs (marks, check-outs, verdicts, acks, reseeds) of queues whose name starts with this prefix")
}

// hotlistOptions reads the hot-list flags. A 0 interval that means "off"
// maps to the hotlist.Options spelling (negative, or DisableSweep).
func hotlistOptions(a *app) (hotlist.Options, error) {
	var o hotlist.Options
	switch w := a.v.GetString("hotlist-width"); w {
	case "narrow":
		o.Width = hotlist.WidthNarrow
	case "wide":
		o.Width = hotlist.WidthWide
	default:
		return o, usagef("--hotlist-width must be narrow or wide (got %q)", w)
	}
	ints := []struct {
		name string
		dst  *int
		min  int
	}{
		{"hotlist-shards", &o.Shards, 1}, {"hotlist-reseed-page-size", &o.ReseedPageSize, 1},
		{"hotlist-reseed-max-pages", &o.ReseedMaxPages, 1}, {"hotlist-reseed-concurrency", &o.ReseedConcurrency, 1},
		{"hotlist-window-marks", &o.WindowMarks, 1}, {"hotlist-hint-set-max", &o.HintSetMax, 1},
		{"hotlist-hint-batch", &o.HintBatch, 1}, {"hotlist-top", &o.TopN, 1},
	}
	for _, x := range ints {
		v := a.v.GetInt(x.name)
		if v < x.min {
			return o, usagef("--%s must be at least %d (got %d)", x.name, x.min, v)
		}
		*x.dst = v
	}
	if o.Shards > 1024 {
		return o, usagef("--hotlist-shards must be at most 1024 (got %d)", o.Shards)
	}
	durs := []struct {
		name    string
		dst     *time.Duration
		zeroOff bool // 0 means off (negative in Options)
		min     time.Duration
	}{
		{"hotlist-reseed-interval", &o.ReseedInterval, true, time.Second},
		{"hotlist-reseed-phase", &o.ReseedPhase, false, 0},
		{"hotlist-stranded-after", &o.StrandedAfter, false, 0},
		{"hotlist-sweep-interval", &o.SweepInterval, true, 10 * time.Millisecond},
		{"hotlist-park-max", &o.ParkMax, false, time.Millisecond},
		{"hotlist-leased-slack", &o.LeasedSlack, false, 0},
		{"hotlist-revisit-min", &o.RevisitMin, false, time.Millisecond},
		{"hotlist-revisit-max", &o.RevisitMax, false, time.Millisecond},
		{"hotlist-empty-grace", &o.EmptyGrace, true, 0},
		{"hotlist-wake-tick", &o.WakeTick, false, time.Millisecond},
		{"hotlist-hint-flush", &o.HintFlush, false, time.Millisecond},
		{"hotlist-log-interval", &o.LogInterval, true, time.Second},
	}
	for _, x := range durs {
		d := a.durationFlag(x.name)
		switch {
		case d < 0:
			return o, usagef("--%s must not be negative (got %s)", x.name, d)
		case d == 0 && x.zeroOff:
			*x.dst = -1
		case d < x.min:
			return o, usagef("--%s must be at least %s (got %s)", x.name, x.min, d)
		default:
			*x.dst = d
		}
	}
	if o.SweepInterval < 0 {
		o.DisableSweep = true
	}
	if o.RevisitMax < o.RevisitMin {
		return o, usagef("--hotlist-revisit-max (%s) must be at least --hotlist-revisit-min (%s)", o.RevisitMax, o.RevisitMin)
	}
	o.TracePrefix = a.v.GetString("hotlist-trace")
	return o, nil
}
