package sql

import (
	"bufio"
	"fmt"
	"io/fs"
	"strings"
)

// ManifestName is the file, relative to sql/, that orders the SQL files.
const ManifestName = "manifest.txt"

// Sections of the manifest.
const (
	SectionInstall   = "install"
	SectionUninstall = "uninstall"
)

// Entry is one file the manifest names.
type Entry struct {
	Section string // "install" or "uninstall"
	Path    string // relative to sql/, e.g. "engine/030_tables.sql"
	Line    int    // its line in the manifest
}

// ParseManifest reads the manifest's text: "[section]" lines open a section,
// every other line that is not blank or a "#" comment names one file, in the
// order it runs. It rejects a file named before any section, an unknown
// section, a path that is not a relative .sql path, and a file named twice.
func ParseManifest(text string) ([]Entry, error) {
	var out []Entry
	section := ""
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.TrimSuffix(strings.TrimPrefix(line, "["), "]")
			if section != SectionInstall && section != SectionUninstall {
				return nil, fmt.Errorf("sql/%s:%d: unknown section [%s] (want [%s] or [%s])", ManifestName, n, section, SectionInstall, SectionUninstall)
			}
			continue
		}
		if section == "" {
			return nil, fmt.Errorf("sql/%s:%d: %q comes before any [section]", ManifestName, n, line)
		}
		if !strings.HasSuffix(line, ".sql") || !fs.ValidPath(line) {
			return nil, fmt.Errorf("sql/%s:%d: %q is not a .sql path relative to sql/", ManifestName, n, line)
		}
		if first, ok := seen[line]; ok {
			return nil, fmt.Errorf("sql/%s:%d: %s is already named on line %d", ManifestName, n, line, first)
		}
		seen[line] = n
		out = append(out, Entry{Section: section, Path: line, Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading sql/%s: %w", ManifestName, err)
	}
	return out, nil
}

// Manifest returns the embedded manifest's entries.
func Manifest() ([]Entry, error) {
	raw, err := fs.ReadFile(FS, ManifestName)
	if err != nil {
		return nil, fmt.Errorf("reading embedded sql/%s: %w (the binary was built without the engine)", ManifestName, err)
	}
	return ParseManifest(string(raw))
}

// ManifestFiles returns the paths of one section, in the order they run.
func ManifestFiles(section string) ([]string, error) {
	entries, err := Manifest()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.Section == section {
			out = append(out, e.Path)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sql/%s names no [%s] files", ManifestName, section)
	}
	return out, nil
}
