package config

import (
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/hotlist"
)

// mapSource is a Source over a map: what viper returns from a config file
// (typed YAML values) or the environment (strings).
type mapSource map[string]any

func (m mapSource) IsSet(k string) bool { _, ok := m[k]; return ok }
func (m mapSource) Get(k string) any    { return m[k] }

// Nothing set: the hot-list's own defaults, so serve without a config file
// behaves as hotlist.Options{} does; the fixed ones stay zero for
// hotlist.Options' defaults.
func TestHotlistOptionsDefaults(t *testing.T) {
	t.Parallel()
	o, err := HotlistOptions(mapSource{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Shards != hotlist.DefaultShards || o.Width != hotlist.DefaultWidth || o.ReseedInterval != hotlist.DefaultReseedInterval ||
		o.SweepInterval != hotlist.DefaultSweepInterval || o.DisableSweep || o.StrandedAfter != 0 || o.TracePrefix != "" ||
		o.HintSetMax != hotlist.DefaultHintSetMax || o.LogInterval != hotlist.DefaultLogInterval ||
		o.TopN != 0 || o.WakeTick != 0 { // fixed: hotlist's withDefaults fills them
		t.Fatalf("defaults: %+v", o)
	}
}

// Values reach their fields, from YAML types and environment strings alike;
// 0 turns off what it says it turns off.
func TestHotlistOptionsValues(t *testing.T) {
	t.Parallel()
	o, err := HotlistOptions(mapSource{
		"hotlist-width": "wide", "hotlist-shards": 3, "hotlist-reseed-page-size": "500",
		"hotlist-reseed-interval": "0", "hotlist-sweep-interval": 0, "hotlist-empty-grace": "0s",
		"hotlist-log-interval": "2m", "hotlist-hint-set-max": 1000, "hotlist-trace": "orders.",
		"hotlist-reseed-concurrency": "3",
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Width != hotlist.WidthWide || o.Shards != 3 || o.ReseedPageSize != 500 || o.ReseedInterval >= 0 ||
		o.SweepInterval >= 0 || !o.DisableSweep || o.EmptyGrace >= 0 || o.LogInterval != 2*time.Minute ||
		o.HintSetMax != 1000 || o.TracePrefix != "orders." || o.ReseedConcurrency != 3 {
		t.Fatalf("values: %+v", o)
	}
}

// A bad value is an error naming its key, never a silent zero or default.
func TestHotlistOptionsRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  mapSource
		want string
	}{
		{mapSource{"hotlist-width": "medium"}, "hotlist-width"},
		{mapSource{"hotlist-shards": 0}, "hotlist-shards must be at least 1"},
		{mapSource{"hotlist-shards": 2000}, "hotlist-shards must be at most 1024"},
		{mapSource{"hotlist-shards": "eight"}, "PGQUE_HOTLIST_SHARDS"},
		{mapSource{"hotlist-reseed-interval": 30}, "hotlist-reseed-interval"}, // no unit
		{mapSource{"hotlist-reseed-interval": "10ms"}, "hotlist-reseed-interval must be at least 1s"},
		{mapSource{"hotlist-empty-grace": "-1s"}, "hotlist-empty-grace must not be negative"},
		{mapSource{"hotlist-wake-tick": "5ms"}, "hotlist-wake-tick is no longer a setting: the hot-list uses 5ms"},
	} {
		if _, err := HotlistOptions(tc.src); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
}

// Each key is declared once and spelled as its environment variable says.
func TestHotlistKeysUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, k := range append(append([]Tunable(nil), Hotlist...), HotlistFixed...) {
		if seen[k.Name()] || !strings.HasPrefix(k.Name(), "hotlist-") || k.Help() == "" {
			t.Errorf("key %q: duplicate, not hotlist-…, or no help", k.Name())
		}
		seen[k.Name()] = true
		if k.Env() != "PGQUE_"+strings.ToUpper(strings.ReplaceAll(k.Name(), "-", "_")) {
			t.Errorf("%s: env %s", k.Name(), k.Env())
		}
	}
}
