// Package clidoc renders the CLI reference (docs/reference/cli/) from the
// cobra command tree: one Markdown file per command, named as cobra's doc
// package names them (pgquectl_dev_stop.md), with no date, version or
// machine-specific value in it, so the checked-in reference changes only
// when a command, flag or help text does.
//
// A flag's default is printed from its pflag default, except when the
// flag's own usage text explains the default ("default: the number of
// CPUs, ..."): such defaults are computed at start-up and would make the
// reference differ between machines.
package clidoc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Regenerate is the command that rewrites the reference; checks name it.
const Regenerate = "go run ./scripts/gendocs"

// Generate returns the reference of root and every available sub-command,
// keyed by file name.
func Generate(root *cobra.Command) map[string][]byte {
	root.InitDefaultVersionFlag()
	files := map[string][]byte{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		files[fileName(c)] = render(c)
		for _, sub := range children(c) {
			walk(sub)
		}
	}
	walk(root)
	return files
}

// Write replaces the Markdown files of dir with files (a file no longer
// generated is removed).
func Write(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if _, keep := files[filepath.Base(p)]; !keep {
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("removing stale %s: %w", p, err)
			}
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// Diff lists how the Markdown files of dir differ from files: missing,
// stale or changed file names, sorted; empty when dir is up to date.
func Diff(dir string, files map[string][]byte) ([]string, error) {
	var out []string
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	for _, p := range old {
		if _, ok := files[filepath.Base(p)]; !ok {
			out = append(out, filepath.Base(p)+" (no such command any more)")
		}
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case os.IsNotExist(err):
			out = append(out, name+" (missing)")
		case err != nil:
			return nil, err
		case !bytes.Equal(got, want):
			out = append(out, name+" (changed)")
		}
	}
	sort.Strings(out)
	return out, nil
}

func children(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
			out = append(out, sub)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

func fileName(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
}

func render(c *cobra.Command) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!-- Generated from the command tree by %s: do not edit. -->\n\n", Regenerate)
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", c.CommandPath(), c.Short)
	fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
	if c.Long != "" {
		fmt.Fprintf(&b, "```text\n%s\n```\n\n", strings.TrimRight(c.Long, "\n"))
	}
	if c.Example != "" {
		fmt.Fprintf(&b, "## Examples\n\n```sh\n%s\n```\n\n", strings.TrimRight(c.Example, "\n"))
	}
	if subs := children(c); len(subs) > 0 {
		b.WriteString("## Commands\n\n")
		for _, sub := range subs {
			fmt.Fprintf(&b, "* [%s](%s): %s\n", sub.CommandPath(), fileName(sub), sub.Short)
		}
		b.WriteString("\n")
	}
	flagTable(&b, "Flags", c.NonInheritedFlags())
	flagTable(&b, "Flags of every command", c.InheritedFlags())
	if c.HasParent() {
		p := c.Parent()
		fmt.Fprintf(&b, "Parent: [%s](%s)\n", p.CommandPath(), fileName(p))
	}
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n')
}

func flagTable(b *bytes.Buffer, title string, fs *pflag.FlagSet) {
	var rows []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" {
			name += " " + varname
		}
		def := f.DefValue
		if strings.Contains(usage, "default:") {
			def = "(see text)"
		} else if def != "" {
			def = "`" + def + "`"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, def, cell(usage)))
	})
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## %s\n\n| flag | default | meaning |\n|---|---|---|\n%s\n\n", title, strings.Join(rows, "\n"))
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}
