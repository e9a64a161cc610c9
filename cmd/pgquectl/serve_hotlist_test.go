package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/config"
)

// serve --help shows the hot-list switch and none of its tunables: those
// are config-file keys (internal/config.Hotlist).
func TestServeHotlistFlags(t *testing.T) {
	t.Parallel()
	out, _, code := runMain(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "--hotlist ") || !strings.Contains(out, config.HotlistReferencePath) {
		t.Errorf("serve --help lacks --hotlist or the pointer to %s:\n%s", config.HotlistReferencePath, out)
	}
	for _, k := range slices.Concat(config.Hotlist, config.HotlistFixed) {
		if strings.Contains(out, "--"+k.Name()) {
			t.Errorf("serve --help lists the tunable --%s", k.Name())
		}
	}
	if strings.Contains(out, "--no-auto-tick") {
		t.Errorf("serve --help lists --no-auto-tick, a flag without effect")
	}
}

// A removed hot-list flag fails (usage error, before any database work),
// naming the config-file key and the environment variable that replace it.
func TestServeRemovedHotlistFlags(t *testing.T) {
	t.Parallel()
	for _, k := range config.Hotlist {
		args := []string{"serve", "--" + k.Name(), "7"}
		_, stderr, code := runMain(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "--"+k.Name()+" is no longer a flag") ||
			!strings.Contains(stderr, `"`+k.Name()+`: 7"`) || !strings.Contains(stderr, k.Env()+"=7") {
			t.Errorf("serve %v: exit %d %q, want a usage error naming the key %s and %s", args, code, stderr, k.Name(), k.Env())
		}
	}
	for _, k := range config.HotlistFixed {
		args := []string{"serve", "--" + k.Name(), "7"}
		_, stderr, code := runMain(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "--"+k.Name()+" was removed: the hot-list uses "+k.DefaultText()) {
			t.Errorf("serve %v: exit %d %q, want a usage error saying the value the hot-list uses", args, code, stderr)
		}
	}
	// The equals form too; --no-auto-tick (hidden, no effect) still parses.
	if _, stderr, code := runMain(t, "serve", "--no-auto-tick", "--hotlist-width=wide"); code != exitUsage || !strings.Contains(stderr, `"hotlist-width: wide"`) {
		t.Errorf("--hotlist-width=wide: exit %d %q", code, stderr)
	}
}

// The tunables read the environment and the config file; a bad value is a
// usage error naming the key.
func TestServeHotlistEnv(t *testing.T) {
	t.Setenv("PGQUE_HOTLIST_WIDTH", "sideways")
	if _, stderr, code := runMain(t, "serve"); code != exitUsage || !strings.Contains(stderr, "hotlist-width") || !strings.Contains(stderr, "sideways") {
		t.Fatalf("PGQUE_HOTLIST_WIDTH=sideways: exit %d %q", code, stderr)
	}
}

func TestServeHotlistConfigFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, says string }{
		{"hotlist-shards: 0\n", "hotlist-shards must be at least 1"},
		{"hotlist-reseed-interval: 30\n", `hotlist-reseed-interval = "30"`},
		{"hotlist-top: 3\n", "hotlist-top is no longer a setting"},
	} {
		file := filepath.Join(t.TempDir(), "pgquectl.yaml")
		if err := os.WriteFile(file, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, stderr, code := runMain(t, "serve", "--config", file); code != exitUsage || !strings.Contains(stderr, tc.says) {
			t.Errorf("%q: exit %d %q, want a usage error saying %q", tc.yaml, code, stderr, tc.says)
		}
	}
}
