// Package docs holds no code: its tests check the repository's Markdown.
// TestMarkdownLinksResolve: every relative link in a *.md file names an
// existing file (and, into a Markdown file, an existing heading).
// TestReadmeMapMatchesTree: README.md's "Where things are" map names only
// paths that exist, and names every top-level directory of internal/,
// sql/ and bench/.
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository root, relative to this package.
const repoRoot = ".."

// skipDirs are not part of the repository's documentation.
var skipDirs = map[string]bool{".git": true, ".pgquectl": true, "node_modules": true}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	fenceRE   = regexp.MustCompile("(?m)^ {0,3}(```|~~~)")
	codeRE    = regexp.MustCompile("`[^`\n]*`")
	headingRE = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
)

func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDirs[d.Name()] {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// stripCode removes fenced code blocks and inline code spans: a link
// written inside code is an example, not a link.
func stripCode(s string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.SplitAfter(s, "\n") {
		if fenceRE.MatchString(line) {
			in = !in
			b.WriteString("\n")
			continue
		}
		if in {
			b.WriteString("\n")
			continue
		}
		b.WriteString(codeRE.ReplaceAllString(line, ""))
	}
	return b.String()
}

// anchors lists the heading anchors of a Markdown text as GitHub makes
// them: lower case, punctuation dropped, spaces to hyphens, repeats
// numbered -1, -2, ...
func anchors(s string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	var in bool
	for _, line := range strings.Split(s, "\n") {
		if fenceRE.MatchString(line) {
			in = !in
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if in || m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func slugify(h string) string {
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestMarkdownLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(p string) map[string]bool {
		if a, ok := cache[p]; ok {
			return a
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cache[p] = anchors(string(b))
		return cache[p]
	}
	var bad []string
	for _, file := range markdownFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCode(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(resolved); err != nil {
					bad = append(bad, fmt.Sprintf("%s: %s: no such file", rel(file), target))
					continue
				}
			}
			if frag != "" && strings.HasSuffix(resolved, ".md") && !anchorsOf(resolved)[frag] {
				bad = append(bad, fmt.Sprintf("%s: %s: no heading with that anchor in %s", rel(file), target, rel(resolved)))
			}
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d broken relative links in Markdown files (fix the link, or the heading it names):\n%s",
			len(bad), strings.Join(bad, "\n"))
	}
}

func rel(p string) string {
	r, err := filepath.Rel(repoRoot, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// mapSection returns README.md's "Where things are" section.
func mapSection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Where things are\n")
	if i < 0 {
		t.Fatal(`README.md has no "## Where things are" section (the map of the tree)`)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	return s
}

// mapPaths returns the paths the map names: the code spans of its first
// column.
func mapPaths(section string) []string {
	var out []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line[1:], "|", 2)[0]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

func TestReadmeMapMatchesTree(t *testing.T) {
	paths := mapPaths(mapSection(t))
	if len(paths) == 0 {
		t.Fatal(`README.md's "Where things are" names no path: its table's first column holds the paths in backquotes`)
	}
	named := map[string]bool{}
	for _, p := range paths {
		named[p] = true
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p))); err != nil {
			t.Errorf("README.md, \"Where things are\", names %s, which does not exist: update the map", p)
		}
	}
	for _, parent := range []string{"internal", "sql", "bench"} {
		entries, err := os.ReadDir(filepath.Join(repoRoot, parent))
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, e := range entries {
			p := parent + "/" + e.Name()
			if e.IsDir() && !named[p] {
				missing = append(missing, p)
			}
		}
		sort.Strings(missing)
		for _, p := range missing {
			t.Errorf("README.md, \"Where things are\", does not name %s: add a row for it", p)
		}
	}
}
