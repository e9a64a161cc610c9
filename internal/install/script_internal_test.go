package install

import (
	"path"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	pgquesql "github.com/pgquectl/pgquectl/sql"
)

func TestScriptOrderAndHeaders(t *testing.T) {
	t.Parallel()
	fs, err := InstallFiles()
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgquesql.ManifestFiles(pgquesql.SectionInstall)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fs {
		got = append(got, f.Name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("install files %v, the manifest says %v", got, want)
	}
	// The engine first, then the broker built on it, then the procedures
	// and grants (which name every function).
	var folders []string
	for _, name := range got {
		if d := path.Dir(name); len(folders) == 0 || folders[len(folders)-1] != d {
			folders = append(folders, d)
		}
	}
	if !slices.Equal(folders, []string{"engine", "broker", "procedures"}) {
		t.Errorf("install folders run in the order %v, want engine, broker, procedures, each in one run", folders)
	}
	text, err := Script()
	if err != nil {
		t.Fatal(err)
	}
	last := -1
	for _, f := range fs {
		i := strings.Index(text, "-- file: "+f.Name+"\n")
		if i < 0 || i < last {
			t.Fatalf("header of %s missing or out of order", f.Name)
		}
		last = i
	}
	if strings.Contains(strings.ToUpper(text), "\nCOMMIT;") || strings.Contains(strings.ToUpper(text), "\nBEGIN;") {
		t.Error("the script must not manage its own transaction (it runs inside pgquectl's, or psql -1)")
	}
}

func TestVersionNum(t *testing.T) {
	t.Parallel()
	n, err := ParseVersionNum(Version)
	if err != nil || n != VersionNum {
		t.Fatalf("ParseVersionNum(%q) = %d, %v; VersionNum = %d", Version, n, err, VersionNum)
	}
	for _, bad := range []string{"1", "1.2", "1.2.x", "1.2.300", "-1.0.0"} {
		if _, err := ParseVersionNum(bad); err == nil {
			t.Errorf("ParseVersionNum(%q) accepted", bad)
		}
	}
}

func TestLocate(t *testing.T) {
	t.Parallel()
	s := newScript([]File{
		{Name: "engine/a.sql", Text: "SELECT 1;\nSELECT ünï;\n"},
		{Name: "engine/b.sql", Text: "x\ny\nSELECT broken"},
	})
	pos := func(needle string) int {
		i := strings.Index(s.text, needle)
		if i < 0 {
			t.Fatalf("%q not in script", needle)
		}
		return utf8.RuneCountInString(s.text[:i]) + 1
	}
	for _, tc := range []struct {
		needle, file string
		line         int
	}{
		{"SELECT 1", "engine/a.sql", 1},
		{"ünï", "engine/a.sql", 2},
		{"x\ny", "engine/b.sql", 1},
		{"broken", "engine/b.sql", 3},
	} {
		name, line, ok := s.locate(pos(tc.needle))
		if !ok || name != tc.file || line != tc.line {
			t.Errorf("%q: got %s:%d (%v), want %s:%d", tc.needle, name, line, ok, tc.file, tc.line)
		}
	}
	if _, _, ok := s.locate(0); ok {
		t.Error("position 0 located")
	}
}
