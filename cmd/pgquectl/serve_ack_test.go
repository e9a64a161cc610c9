package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/broker"
)

func TestServeAckConcurrencyFlag(t *testing.T) {
	t.Parallel()
	out, _, code := runMain(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	i := strings.Index(out, "--ack-concurrency")
	if i < 0 || !strings.Contains(out[i:], fmt.Sprintf("(default %d)", broker.DefaultAckConcurrency)) {
		t.Errorf("serve --help lacks --ack-concurrency with its default:\n%s", out)
	}
	for _, bad := range []string{"0", "1001"} {
		if _, stderr, code := runMain(t, "serve", "--ack-concurrency", bad); code != exitUsage || !strings.Contains(stderr, "--ack-concurrency") {
			t.Errorf("--ack-concurrency %s: exit %d %q, want a usage error", bad, code, stderr)
		}
	}
}
