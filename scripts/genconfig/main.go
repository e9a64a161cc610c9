// Command genconfig writes the generated configuration reference
// (docs/reference/hotlist-config.md) from internal/config. Run it from the
// repository root after changing a tunable, its default or its help:
//
//	go run ./scripts/genconfig
//
// Its test fails while the checked-in file differs from what it writes.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pgquectl/pgquectl/internal/config"
)

func main() {
	if err := write("."); err != nil {
		fmt.Fprintln(os.Stderr, "genconfig:", err)
		os.Exit(1)
	}
}

// write renders the reference into the repository rooted at root.
func write(root string) error {
	var b bytes.Buffer
	if err := config.WriteHotlistReference(&b); err != nil {
		return err
	}
	path := filepath.Join(root, config.HotlistReferencePath)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w (run from the repository root)", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w (run from the repository root)", path, err)
	}
	return nil
}
