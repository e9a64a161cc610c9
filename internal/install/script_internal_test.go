package install

import (
	"path"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScriptOrderAndHeaders(t *testing.T) {
	t.Parallel()
	fs, err := InstallFiles()
	if err != nil {
		t.Fatal(err)
	}
	var install, procs []string
	for _, f := range fs {
		switch path.Dir(f.Name) {
		case "install":
			if len(procs) > 0 {
				t.Fatalf("%s comes after a procedures file", f.Name)
			}
			install = append(install, f.Name)
		case "procedures":
			procs = append(procs, f.Name)
		default:
			t.Fatalf("unexpected file %s", f.Name)
		}
	}
	if len(install) == 0 || len(procs) == 0 {
		t.Fatalf("install files %d, procedures %d", len(install), len(procs))
	}
	if !sort.StringsAreSorted(install) || !sort.StringsAreSorted(procs) {
		t.Errorf("files not sorted: %v %v", install, procs)
	}
	text, err := Script()
	if err != nil {
		t.Fatal(err)
	}
	last := -1
	for _, f := range fs {
		i := strings.Index(text, "-- file: "+path.Base(f.Name)+"\n")
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
		{Name: "install/a.sql", Text: "SELECT 1;\nSELECT ünï;\n"},
		{Name: "install/b.sql", Text: "x\ny\nSELECT broken"},
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
		{"SELECT 1", "install/a.sql", 1},
		{"ünï", "install/a.sql", 2},
		{"x\ny", "install/b.sql", 1},
		{"broken", "install/b.sql", 3},
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
