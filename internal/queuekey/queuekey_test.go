package queuekey_test

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/queuekey"
)

func TestMakeSplit(t *testing.T) {
	if k := queuekey.Make("t", "q"); k != "t\x1fq" {
		t.Fatalf("Make(t, q) = %q", k)
	}
	for _, c := range [][2]string{{"t", "q"}, {"", "q"}, {"t", ""}, {"", ""}} {
		if tn, q := queuekey.Split(queuekey.Make(c[0], c[1])); tn != c[0] || q != c[1] {
			t.Errorf("Split(Make(%q, %q)) = %q, %q", c[0], c[1], tn, q)
		}
	}
	if tn, q := queuekey.Split("plain"); tn != "" || q != "plain" {
		t.Errorf("Split(plain) = %q, %q; want the default tenant", tn, q)
	}
}

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// goLiterals calls found for each string, rune and number literal of every
// non-test Go file of the repository (comments are not literals).
func goLiterals(t *testing.T, found func(file string, line int, kind token.Token, lit, value string)) {
	t.Helper()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); strings.HasPrefix(n, ".") && path != repoRoot || n == "testdata" || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		fset := token.NewFileSet()
		file := fset.AddFile(rel, -1, len(src))
		var s scanner.Scanner
		s.Init(file, src, nil, 0)
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				return nil
			}
			switch tok {
			case token.STRING, token.CHAR:
				v := lit
				if u, err := strconv.Unquote(lit); err == nil {
					v = u
				}
				found(filepath.ToSlash(rel), fset.Position(pos).Line, tok, lit, v)
			case token.INT:
				found(filepath.ToSlash(rel), fset.Position(pos).Line, tok, lit, lit)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKeySeparatorHasOneHome fails when the key separator (0x1f) is
// written outside this package in a non-test Go file, in any spelling
// ("\x1f", '\x1f', "\u001f", 0x1f, 31 as a rune is not caught): keys are
// built and split by Make and Split only.
func TestKeySeparatorHasOneHome(t *testing.T) {
	goLiterals(t, func(file string, line int, kind token.Token, lit, value string) {
		if strings.HasPrefix(file, "internal/queuekey/") {
			return
		}
		if kind == token.INT && strings.EqualFold(lit, "0x1f") || kind != token.INT && strings.ContainsRune(value, queuekey.SepRune) {
			t.Errorf("%s:%d: the queue-key separator written as %s; use internal/queuekey (Make, Split, Sep)", file, line, lit)
		}
	})
}

// TestQueueModeHasOneHome fails when the reserved consumer group's name is
// written outside its home, internal/broker/broker.go (broker.QueueMode,
// broker.GroupOrDefault), in a non-test Go file. (Tests may spell it: the
// wire value is what they check.) The SQL side has its own home and check:
// pgque.queue_mode_group(), sql/queue_mode_test.go.
func TestQueueModeHasOneHome(t *testing.T) {
	goLiterals(t, func(file string, line int, kind token.Token, lit, value string) {
		if file == "internal/broker/broker.go" {
			return
		}
		if kind != token.INT && strings.Contains(value, "__QUEUE_MODE__") {
			t.Errorf("%s:%d: the queue-mode group written as %s; use broker.QueueMode / broker.GroupOrDefault", file, line, lit)
		}
	})
}
