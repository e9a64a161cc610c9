package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Flags out of range are refused before anything starts (no cluster, no
// state directory touched), with the flag named.
func TestMainRefusesBadLatencyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--latency-consumers", "-1"}, "--latency-consumers -1"},
		{[]string{"--latency-consumers", "1001"}, "--latency-consumers 1001"},
		{[]string{"--latency-rate", "-5"}, "--latency-rate -5"},
		{[]string{"--latency-duration", "-1s"}, "--latency-duration -1s"},
	} {
		var out, errb bytes.Buffer
		state := t.TempDir() + "/never"
		code := Main(append(tc.args, "--state-dir", state), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, errb.String(), tc.want)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("%v: the state directory was touched (%v)", tc.args, err)
		}
	}
}
