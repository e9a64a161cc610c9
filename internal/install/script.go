// Package install puts the embedded SQL engine into a database and takes it
// out again: one transaction, serialized by an advisory lock, recorded in
// pgque.engine_version, refusing a database whose engine is newer than this
// binary's.
package install

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"

	pgquesql "github.com/pgquectl/pgquectl/sql"
)

// Version is the engine version this binary installs. pgque.version() in the
// SQL returns the same text, and the install records it in
// pgque.engine_version (a test checks that they agree).
const Version = "0.2.0"

// VersionNum is Version as the integer pgque.engine_version.version_num
// holds: major*10000 + minor*100 + patch.
const VersionNum = 200

// File is one embedded SQL file.
type File struct {
	// Name is the path inside sql/, e.g. "engine/030_tables.sql".
	Name string
	Text string
}

// files returns the files of one section of sql/manifest.txt, in the
// order the manifest gives.
func files(section string) ([]File, error) {
	names, err := pgquesql.ManifestFiles(section)
	if err != nil {
		return nil, err
	}
	out := make([]File, 0, len(names))
	for _, name := range names {
		raw, err := fs.ReadFile(pgquesql.FS, name)
		if err != nil {
			return nil, fmt.Errorf("reading embedded %s (named in sql/%s): %w", name, pgquesql.ManifestName, err)
		}
		out = append(out, File{Name: name, Text: string(raw)})
	}
	return out, nil
}

// InstallFiles returns the [install] files of sql/manifest.txt (engine/,
// broker/, procedures/), in the order they run.
func InstallFiles() ([]File, error) { return files(pgquesql.SectionInstall) }

// UninstallFiles returns the [uninstall] files of sql/manifest.txt.
func UninstallFiles() ([]File, error) { return files(pgquesql.SectionUninstall) }

// script is a concatenation of files that remembers where each file starts,
// so a server error position can be traced back to a file and line.
type script struct {
	text string
	// sum is the hex SHA-256 of the files' names and texts (install scripts
	// record it in pgque.engine_version.script_sha256).
	sum string
	// starts[i] is the 1-based character position where file i begins.
	starts []int
	files  []File
}

func newScript(fs []File) script {
	var b strings.Builder
	s := script{files: fs}
	chars := 0
	for _, f := range fs {
		header := "-- file: " + f.Name + "\n"
		b.WriteString(header)
		chars += utf8.RuneCountInString(header)
		s.starts = append(s.starts, chars+1)
		text := f.Text
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		b.WriteString(text)
		chars += utf8.RuneCountInString(text)
	}
	s.text = b.String()
	h := sha256.New()
	for _, f := range fs {
		fmt.Fprintf(h, "%s\x00%d\x00%s", f.Name, len(f.Text), f.Text)
	}
	s.sum = hex.EncodeToString(h.Sum(nil))
	return s
}

// newInstallScript is newScript plus a last statement recording the
// script's checksum with the engine version, so that a later install of
// the same version by a binary with other SQL knows to run its script.
func newInstallScript(fs []File) script {
	s := newScript(fs)
	s.text += fmt.Sprintf("-- recorded by pgquectl: the checksum of the script above\n"+
		"UPDATE pgque.engine_version SET script_sha256 = '%s' WHERE version_num = %d;\n", s.sum, VersionNum)
	return s
}

// locate maps a 1-based character position in the script to a file name
// and a 1-based line in that file. ok is false when pos is outside.
func (s script) locate(pos int) (name string, line int, ok bool) {
	if pos <= 0 {
		return "", 0, false
	}
	for i := len(s.starts) - 1; i >= 0; i-- {
		if pos >= s.starts[i] {
			offset := pos - s.starts[i] // characters into the file
			text := []rune(s.files[i].Text)
			if offset > len(text) {
				return "", 0, false
			}
			return s.files[i].Name, 1 + strings.Count(string(text[:offset]), "\n"), true
		}
	}
	return "", 0, false
}

// Script returns the install SQL: the [install] files of sql/manifest.txt in
// its order, each preceded by a "-- file: NAME" line.
// It runs as one transaction: `psql -1 -f` or pgquectl install.
func Script() (string, error) {
	fs, err := InstallFiles()
	if err != nil {
		return "", err
	}
	return newInstallScript(fs).text, nil
}

// UninstallScript returns the [uninstall] files the same way.
func UninstallScript() (string, error) {
	fs, err := UninstallFiles()
	if err != nil {
		return "", err
	}
	return newScript(fs).text, nil
}

// InstallScript returns the install script as one text, the form
// `install --dry-run` prints: it needs no database.
func InstallScript() (string, error) {
	fs, err := InstallFiles()
	if err != nil {
		return "", err
	}
	return newInstallScript(fs).text, nil
}
