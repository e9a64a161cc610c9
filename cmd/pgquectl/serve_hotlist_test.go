package main

import (
	"strings"
	"testing"
)

func TestServeHotlistFlags(t *testing.T) {
	t.Parallel()
	out, _, code := runMain(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--hotlist ", "--hotlist-shards", "--hotlist-width", "--hotlist-reseed-interval",
		"--hotlist-sweep-interval", "--hotlist-trace", "--hotlist-log-interval", "--hotlist-hint-set-max"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	for _, bad := range [][]string{
		{"--hotlist-width", "medium"},
		{"--hotlist-shards", "0"},
		{"--hotlist-reseed-interval", "-1s"},
		{"--hotlist-reseed-interval", "10ms"},
		{"--hotlist-revisit-min", "2s", "--hotlist-revisit-max", "1s"},
	} {
		if _, stderr, code := runMain(t, append([]string{"serve"}, bad...)...); code != exitUsage || !strings.Contains(stderr, bad[0]) {
			t.Errorf("serve %v: exit %d %q, want a usage error naming %s", bad, code, stderr, bad[0])
		}
	}
}

// The knobs read the environment like every serve flag.
func TestServeHotlistEnv(t *testing.T) {
	t.Setenv("PGQUE_HOTLIST_WIDTH", "sideways")
	if _, stderr, code := runMain(t, "serve"); code != exitUsage || !strings.Contains(stderr, "--hotlist-width") {
		t.Fatalf("PGQUE_HOTLIST_WIDTH=sideways: exit %d %q", code, stderr)
	}
}
