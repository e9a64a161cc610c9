// Command gendocs regenerates the generated documentation: the CLI
// reference in docs/reference/cli/, one file per command, rendered from
// pgquectl's cobra command tree (internal/clidoc). Run it from the
// repository root after changing a command, a flag or a help text:
//
//	go run ./scripts/gendocs
//
// TestCLIReference (cmd/pgquectl, part of scripts/test.sh) fails while the
// checked-in reference differs from the tree. The tree is built by package
// main of cmd/pgquectl, which nothing can import, so this runs that test in
// its rewrite mode.
package main

import (
	"fmt"
	"os"
	"os/exec"
)

func main() {
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestCLIReference$",
		"./cmd/pgquectl/", "-args", "-update-cli-reference")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs: regenerating docs/reference/cli failed (run it from the repository root):", err)
		os.Exit(1)
	}
	fmt.Println("gendocs: docs/reference/cli regenerated")
}
