package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pgquectl/pgquectl/internal/config"
)

// The checked-in reference is what genconfig writes now.
func TestHotlistReferenceIsGenerated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, config.HotlistReferencePath))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", config.HotlistReferencePath))
	if err != nil {
		t.Fatalf("%v: run go run ./scripts/genconfig", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s differs from the code (internal/config/hotlist.go, internal/hotlist/options.go): run go run ./scripts/genconfig and commit the result", config.HotlistReferencePath)
	}
}
