package main

import (
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/install"
)

// TestVersionFlagAndCommit: `pgquectl --version` exists; both it and
// `version` name the commit (here set as -ldflags "-X main.commit=..." sets it).
func TestVersionFlagAndCommit(t *testing.T) {
	saved := commit
	commit = "0123abc"
	t.Cleanup(func() { commit = saved })
	out, errOut, code := runMain(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "pgquectl ") || !strings.Contains(out, "commit 0123abc") || !strings.Contains(out, install.Version) {
		t.Errorf("--version: exit %d, %q %q", code, out, errOut)
	}
	out, errOut, code = runMain(t, "version", "--dsn", "postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=1")
	if code != 0 || !strings.Contains(out, "commit    0123abc\n") {
		t.Errorf("version: exit %d, %q %q", code, out, errOut)
	}
}

// TestBadEnvironmentValues: a malformed PGQUE_* value (or a negative
// duration) is a usage error naming the variable, not a silent 0.
func TestBadEnvironmentValues(t *testing.T) {
	for _, tc := range []struct {
		env, value, says string
	}{
		{"PGQUE_SAMPLE", "abc", `sample (env PGQUE_SAMPLE or the config file) = "abc": not a valid duration`},
		{"PGQUE_SAMPLE", "-5s", "must not be negative"},
		{"PGQUE_CHECK", "maybe", `check (env PGQUE_CHECK or the config file) = "maybe": not a valid bool`},
		{"PGQUE_TICK_DEAD_MAX", "lots", "not a valid int64"},
		{"PGQUE_NOTIFY_WARN", "ten%", "not a valid float64"},
		{"PGQUE_CONNECT_TIMEOUT", "-1s", "must not be negative"},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			_, errOut, code := runMain(t, "status", "--dsn", "postgres://nobody@127.0.0.1:1/x?sslmode=disable")
			if code != exitUsage || !strings.Contains(errOut, tc.says) {
				t.Errorf("exit %d (want %d), stderr %q, want it to say %q", code, exitUsage, errOut, tc.says)
			}
		})
	}
	_, errOut, code := runMain(t, "status", "--sample", "-2s")
	if code != exitUsage || !strings.Contains(errOut, "--sample -2s: must not be negative") {
		t.Errorf("--sample -2s: exit %d, %q", code, errOut)
	}
	_, errOut, code = runMain(t, "status", "--query-timeout", "-1s")
	if code != exitUsage || !strings.Contains(errOut, "must not be negative") {
		t.Errorf("--query-timeout -1s: exit %d, %q", code, errOut)
	}
}

// TestLogLevelWarning: warning is accepted as warn; an unknown level names
// the valid ones.
func TestLogLevelWarning(t *testing.T) {
	t.Parallel()
	out, errOut, code := runMain(t, "--log-level", "warning", "dev", "dsn", "--state-dir", t.TempDir()+"/none")
	if strings.Contains(errOut, "log-level") {
		t.Errorf("--log-level warning refused: exit %d, %q %q", code, out, errOut)
	}
	_, errOut, code = runMain(t, "--log-level", "loud", "dev", "dsn", "--state-dir", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, `--log-level "loud": use debug, info, warn or error`) {
		t.Errorf("--log-level loud: exit %d, %q", code, errOut)
	}
}
