// Command gendocs regenerates the generated documentation. Run it from the
// repository root after changing a command, a flag or a help text:
//
//	go run ./scripts/gendocs
//
// It writes the CLI reference in docs/reference/cli/, one file per command,
// rendered from pgquectl's cobra command tree (internal/clidoc), and, when
// the repository has scripts/genconfig, the configuration reference that
// command writes. TestCLIReference (cmd/pgquectl, part of scripts/test.sh)
// fails while the checked-in CLI reference differs from the tree. The tree
// is built by package main of cmd/pgquectl, which nothing can import, so
// this runs that test in its rewrite mode.
package main

import (
	"fmt"
	"os"
	"os/exec"
)

func main() {
	steps := [][]string{{"go", "test", "-count=1", "-run", "^TestCLIReference$",
		"./cmd/pgquectl/", "-args", "-update-cli-reference"}}
	if _, err := os.Stat("scripts/genconfig"); err == nil {
		steps = append(steps, []string{"go", "run", "./scripts/genconfig"})
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "gendocs: %v failed (run it from the repository root): %v\n", s, err)
			os.Exit(1)
		}
	}
	fmt.Println("gendocs: docs/reference regenerated")
}
