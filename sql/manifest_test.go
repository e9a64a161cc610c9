package sql

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestManifestCoversTree: manifest.txt names every .sql file under sql/
// exactly once and no file that is missing; within a folder, file names sort
// in the order the manifest runs them (the number in a name is its place).
func TestManifestCoversTree(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ParseManifest(string(raw)) // rejects a file named twice
	if err != nil {
		t.Fatal(err)
	}
	onDisk := map[string]bool{}
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".sql") {
			onDisk[filepath.ToSlash(p)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	byFolder := map[string][]string{}
	for _, e := range entries {
		named[e.Path] = true
		if !onDisk[e.Path] {
			t.Errorf("sql/%s:%d names %s, which does not exist", ManifestName, e.Line, e.Path)
		}
		if _, err := fs.Stat(FS, e.Path); err != nil {
			t.Errorf("sql/%s:%d names %s, which is not embedded (add its folder to embed.go)", ManifestName, e.Line, e.Path)
		}
		byFolder[path.Dir(e.Path)] = append(byFolder[path.Dir(e.Path)], path.Base(e.Path))
	}
	for p := range onDisk {
		if !named[p] {
			t.Errorf("sql/%s is in no section of sql/%s: add it where it installs", p, ManifestName)
		}
	}
	for dir, names := range byFolder {
		if !slices.IsSorted(names) {
			t.Errorf("sql/%s: the manifest runs %v, not in file-name order: renumber so the names sort as they run", dir, names)
		}
	}
}

// TestParseManifestRejects: the parser's refusals, each with the line.
func TestParseManifestRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ text, want string }{
		{"[install]\nengine/a.sql\nengine/a.sql\n", "already named on line 2"},
		{"engine/a.sql\n", "before any [section]"},
		{"[setup]\nengine/a.sql\n", "unknown section"},
		{"[install]\n../a.sql\n", "not a .sql path"},
		{"[install]\nengine/a.txt\n", "not a .sql path"},
	} {
		_, err := ParseManifest(c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseManifest(%q) = %v, want an error containing %q", c.text, err, c.want)
		}
	}
	got, err := ParseManifest("# c\n\n[install]\n a/1.sql \n# x\n[uninstall]\nb/2.sql\n")
	if err != nil || len(got) != 2 || got[0] != (Entry{"install", "a/1.sql", 4}) || got[1] != (Entry{"uninstall", "b/2.sql", 7}) {
		t.Errorf("ParseManifest = %v, %v", got, err)
	}
}
