package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/spf13/viper"

	"github.com/pgquectl/pgquectl/internal/clidoc"
)

// cliReferenceDir is the generated CLI reference, relative to this package.
const cliReferenceDir = "../../docs/reference/cli"

var updateCLIReference = flag.Bool("update-cli-reference", false,
	"rewrite docs/reference/cli from the command tree (go run ./scripts/gendocs passes it)")

// TestCLIReference fails when docs/reference/cli differs from what the
// command tree renders: a flag, command or help text changed without the
// reference being regenerated.
func TestCLIReference(t *testing.T) {
	root := (&app{v: viper.New(), stdout: io.Discard, stderr: io.Discard}).rootCmd()
	files := clidoc.Generate(root)
	if *updateCLIReference {
		if err := clidoc.Write(cliReferenceDir, files); err != nil {
			t.Fatal(err)
		}
		return
	}
	diff, err := clidoc.Diff(cliReferenceDir, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff) > 0 {
		t.Fatalf("docs/reference/cli is out of date: %s; run %s", strings.Join(diff, ", "), clidoc.Regenerate)
	}
}

// TestCLIReferenceStable renders the tree twice: the reference must not
// depend on map order or on state a first rendering leaves behind.
func TestCLIReferenceStable(t *testing.T) {
	render := func() map[string][]byte {
		return clidoc.Generate((&app{v: viper.New(), stdout: io.Discard, stderr: io.Discard}).rootCmd())
	}
	a, b := render(), render()
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for name, want := range a {
		if string(b[name]) != string(want) {
			t.Errorf("%s differs between two renderings", name)
		}
	}
}
