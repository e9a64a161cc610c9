package cron_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cronSQL matches SQL that reads or changes pg_cron: its tables, its
// functions, its settings, its extension row.
var cronSQL = regexp.MustCompile(`(?i:\b(FROM|JOIN|INTO|UPDATE)\s+)cron\.|\bcron\.(schedule|schedule_in_database|unschedule|alter_job)\s*\(|extname\s*=\s*'pg_cron'|current_setting\(\s*'cron\.|to_regclass\(\s*'cron\.`)

// cronHomeExempt are the packages allowed to touch pg_cron besides
// internal/cron: test infrastructure, which removes the jobs of the
// throwaway databases it drops (internal/pgtest), and the local cluster
// manager, which preloads pg_cron and repoints cron.job.nodeport when a
// cluster moves port (internal/localpg).
var cronHomeExempt = []string{"internal/cron", "internal/pgtest", "internal/localpg"}

// TestPgCronIOHasOneHome fails when Go code outside internal/cron (tests
// aside) runs SQL against pg_cron: every caller goes through this
// package's API.
func TestPgCronIOHasOneHome(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, dir := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				for _, e := range cronHomeExempt {
					if rel == e {
						return filepath.SkipDir
					}
				}
				return nil
			}
			if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for n, line := range strings.Split(string(b), "\n") {
				if cronSQL.MatchString(line) {
					t.Errorf("%s:%d touches pg_cron outside internal/cron (use its API): %s", rel, n+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
