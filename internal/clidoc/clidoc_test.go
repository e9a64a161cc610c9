package clidoc

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func tree() *cobra.Command {
	root := &cobra.Command{Use: "tool", Short: "the tool", Version: "v9"}
	root.PersistentFlags().String("dsn", "", "connection (default: PG* variables)")
	run := func(*cobra.Command, []string) {}
	sub := &cobra.Command{Use: "serve", Short: "serve it", Long: "Serves.", Run: run}
	sub.Flags().Int("workers", 7, "workers: one | two")
	sub.Flags().Int("conns", 3, "connections; default: the CPUs")
	sub.Flags().Bool("secret", false, "hidden")
	_ = sub.Flags().MarkHidden("secret")
	leaf := &cobra.Command{Use: "stop", Short: "stop it", Run: run}
	sub.AddCommand(leaf)
	root.AddCommand(sub, &cobra.Command{Use: "old", Short: "gone", Hidden: true, Run: run})
	return root
}

func TestGenerate(t *testing.T) {
	files := Generate(tree())
	var names []string
	for n := range files {
		names = append(names, n)
	}
	if want := []string{"tool.md", "tool_serve.md", "tool_serve_stop.md"}; !sameSet(names, want) {
		t.Fatalf("files %v, want %v (hidden commands left out)", names, want)
	}
	serve := string(files["tool_serve.md"])
	for _, want := range []string{
		"| `--workers` int | `7` | workers: one \\| two |", // default shown, pipe escaped
		"| `--conns` int | (see text) |",                   // a default the usage explains is machine-specific
		"| `--dsn` string | (see text) |",                  // inherited flags listed too
		"[tool serve stop](tool_serve_stop.md)",
		"Parent: [tool](tool.md)",
	} {
		if !strings.Contains(serve, want) {
			t.Errorf("tool_serve.md lacks %q:\n%s", want, serve)
		}
	}
	if strings.Contains(serve, "secret") || strings.Contains(string(files["tool.md"]), "tool old") {
		t.Error("hidden flag or command rendered")
	}
	if !strings.Contains(string(files["tool.md"]), "`--version`") {
		t.Error("tool.md lacks --version")
	}
}

func TestWriteAndDiff(t *testing.T) {
	dir := t.TempDir()
	files := Generate(tree())
	if err := os.WriteFile(filepath.Join(dir, "tool_gone.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	diff, err := Diff(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tool.md (missing)", "tool_gone.md (no such command any more)", "tool_serve.md (missing)", "tool_serve_stop.md (missing)"}; !reflect.DeepEqual(diff, want) {
		t.Fatalf("diff %v, want %v", diff, want)
	}
	if err := Write(dir, files); err != nil {
		t.Fatal(err)
	}
	if diff, _ := Diff(dir, files); len(diff) != 0 {
		t.Fatalf("after Write: %v", diff)
	}
	if err := os.WriteFile(filepath.Join(dir, "tool.md"), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	if diff, _ := Diff(dir, files); !reflect.DeepEqual(diff, []string{"tool.md (changed)"}) {
		t.Fatalf("after an edit: %v", diff)
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}
