package config

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/pgquectl/pgquectl/internal/hotlist"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// Every hot-list default is written once, in internal/hotlist/options.go;
// the reference table is generated from it. A doc, help text or Go file
// that names a tunable (its key, its flag or its Options field) on the same
// line as that tunable's default value is a second copy that would go
// stale: this test names it. Go files may name a key only in
// internal/config/hotlist.go (one declaration per key), and docs may not
// name the removed flags (--hotlist-shards, ...).
func TestHotlistDefaultsHaveOneHome(t *testing.T) {
	t.Parallel()
	type rule struct {
		key, field string         // the key (also in --key) and the Options field
		def        *regexp.Regexp // the default, in the spellings docs use
	}
	var rules []rule
	all := append(append([]Tunable(nil), Hotlist...), HotlistFixed...)
	for _, tn := range all {
		spellings := defaultSpellings(tn)
		if len(spellings) == 0 {
			continue // "" and 0s: too common to say anything
		}
		field := camel(strings.TrimPrefix(tn.Name(), "hotlist-"))
		rules = append(rules, rule{key: tn.Name(), field: field,
			def: regexp.MustCompile(`(^|[^\w.,])(` + strings.Join(spellings, "|") + `)($|[^\w.,]|[.,]\D|[.,]$)`)})
	}
	keyLiteral := regexp.MustCompile(`"hotlist-[a-z-]+"`)
	skipGo := map[string]bool{"internal/hotlist/options.go": true, "internal/config/hotlist.go": true}
	var copies []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		// Dated results record what was true when they were measured.
		isMD := strings.HasSuffix(rel, ".md") && !(strings.HasPrefix(rel, "bench/") && strings.Contains(rel, "/results/"))
		isGo := strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go")
		if !(isMD && rel != HotlistReferencePath) && !(isGo && !skipGo[rel]) {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if isGo {
				if m := keyLiteral.FindString(line); m != "" {
					copies = append(copies, fmt.Sprintf("%s:%d: key %s declared outside internal/config/hotlist.go", rel, n, m))
				}
			}
			if isMD {
				for _, tn := range all {
					if strings.Contains(line, "--"+tn.Name()) {
						copies = append(copies, fmt.Sprintf("%s:%d: names the removed flag --%s (now the config-file key %s)", rel, n, tn.Name(), tn.Name()))
					}
				}
			}
			for _, r := range rules {
				if (strings.Contains(line, r.key) || strings.Contains(line, r.field)) && r.def.MatchString(line) {
					copies = append(copies, fmt.Sprintf("%s:%d: %s with its default: %s", rel, n, r.key, strings.TrimSpace(line)))
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(copies) > 0 {
		t.Fatalf("second copies of hot-list defaults (link %s instead; defaults live in internal/hotlist/options.go):\n%s",
			HotlistReferencePath, strings.Join(copies, "\n"))
	}
}

// defaultSpellings are regexp alternatives matching t's default as docs and
// code write it: 30s, 30 s, 30000ms, 30 * time.Second; 10000, 10,000.
func defaultSpellings(t Tunable) []string {
	var out []string
	add := func(s string) { out = append(out, regexp.QuoteMeta(s)) }
	switch tt := t.(type) {
	case durTunable:
		d := tt.Default
		if d == 0 {
			return nil
		}
		add(FormatValue(d))
		add(d.String())
		ms := strconv.FormatInt(d.Milliseconds(), 10)
		add(ms + "ms")
		add(ms + " ms")
		if d%time.Second == 0 {
			s := strconv.FormatInt(int64(d/time.Second), 10)
			add(s + "s")
			add(s + " s")
			add(s + " * time.Second")
		}
		if d%time.Millisecond == 0 {
			add(ms + " * time.Millisecond")
		}
	case intTunable:
		add(strconv.Itoa(tt.Default))
		add(commas(tt.Default))
	case strTunable:
		if tt.Default == "" {
			return nil
		}
		add(tt.Default)
	}
	return out
}

// commas writes n with thousands separators: 200000 → 200,000.
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// camel turns reseed-interval into ReseedInterval (the Options field, or
// its prefix: top → Top of TopN).
func camel(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "-") {
		r := []rune(part)
		r[0] = unicode.ToUpper(r[0])
		b.WriteString(string(r))
	}
	return b.String()
}

// The spellings match what they should: the test would see a copy.
func TestDefaultSpellings(t *testing.T) {
	t.Parallel()
	for _, tn := range Hotlist {
		if tn.Name() != "hotlist-reseed-interval" {
			continue
		}
		re := regexp.MustCompile(`(^|[^\w.,])(` + strings.Join(defaultSpellings(tn), "|") + `)($|[^\w.,]|[.,]\D|[.,]$)`)
		for _, s := range []string{"every 30 s per", "(30s)", "30000 ms", "= 30 * time.Second"} {
			if !re.MatchString(s) {
				t.Errorf("%q not matched", s)
			}
		}
		for _, s := range []string{"130s", "30.5 s", "300 ms"} {
			if re.MatchString(s) {
				t.Errorf("%q matched", s)
			}
		}
	}
	if camel("reseed-interval") != "ReseedInterval" || commas(200000) != "200,000" || commas(500) != "500" {
		t.Fatal("camel or commas")
	}
	_ = hotlist.DefaultReseedInterval
}
