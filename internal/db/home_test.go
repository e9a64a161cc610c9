package db_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// oneHome matches what only internal/db may define: an interface with the
// query methods (db.Querier; other packages use it or alias it) and a
// pointer-dereferencing helper (db.Deref).
var oneHome = regexp.MustCompile(`^\s+(Query|QueryRow)\(ctx context\.Context, sql string, args \.\.\.any\)|^func [dD]eref\b`)

// TestQuerierAndDerefHaveOneHome fails when a second Querier-like interface
// or deref helper appears outside internal/db (tests included).
func TestQuerierAndDerefHaveOneHome(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, dir := range []string{"cmd", "internal", "bench", "scripts"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if strings.HasPrefix(rel, "internal/db/") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for n, line := range strings.Split(string(b), "\n") {
				if oneHome.MatchString(line) {
					t.Errorf("%s:%d: a second copy of db.Querier or db.Deref (use internal/db's): %s", rel, n+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}
