// Command testreport turns `go test -json` output into a short log for CI:
// the package lines (ok / FAIL / build errors), the full output of every
// failing test, the name and reason of every skipped one, and a last line
// "<label>: N passed, N failed, N skipped". It exits 1 when anything failed
// (a test, a package, a build) or when no test ran at all.
//
//	go test -json ./... | go run ./scripts/testreport -label "PostgreSQL 14.23"
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// modulePrefix is left out of package names in the report.
const modulePrefix = "github.com/pgquectl/pgquectl/"

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

type report struct {
	out                     io.Writer
	buf                     map[string][]string // package/test -> output so far
	passed, failed, skipped int
	pkgFailed               bool
	skips                   []string
}

func main() {
	label := flag.String("label", "tests", "what the summary line names (e.g. the PostgreSQL version)")
	flag.Parse()
	start := time.Now()
	r := &report{out: os.Stdout, buf: map[string][]string{}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		r.line(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: reading go test output: %v\n", err)
		os.Exit(1)
	}
	for _, s := range r.skips {
		fmt.Fprintln(r.out, s)
	}
	fmt.Fprintf(r.out, "%s: %d passed, %d failed, %d skipped (tests and subtests, %s)\n",
		*label, r.passed, r.failed, r.skipped, time.Since(start).Round(time.Second))
	if r.failed > 0 || r.pkgFailed || r.passed == 0 {
		os.Exit(1)
	}
}

func (r *report) line(raw []byte) {
	var e event
	if err := json.Unmarshal(raw, &e); err != nil || e.Action == "" {
		fmt.Fprintln(r.out, string(raw)) // not test2json: pass it on
		return
	}
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
		return
	case "build-fail":
		r.pkgFailed = true
		return
	}
	if e.Test == "" { // package level
		switch e.Action {
		case "output":
			if o := strings.TrimSpace(e.Output); o != "PASS" && o != "FAIL" && o != "" {
				fmt.Fprint(r.out, e.Output)
			}
		case "fail":
			r.pkgFailed = true
		}
		return
	}
	key := strings.TrimPrefix(e.Package, modulePrefix) + " " + e.Test
	switch e.Action {
	case "output":
		r.buf[key] = append(r.buf[key], e.Output)
	case "pass":
		r.passed++
		delete(r.buf, key)
	case "skip":
		r.skipped++
		reason := ""
		for _, o := range r.buf[key] {
			if o = strings.TrimSpace(o); o != "" && !strings.HasPrefix(o, "=== ") && !strings.HasPrefix(o, "--- ") {
				reason = o
			}
		}
		r.skips = append(r.skips, fmt.Sprintf("--- SKIP: %s: %s", key, reason))
		delete(r.buf, key)
	case "fail":
		r.failed++
		fmt.Fprintf(r.out, "--- FAIL: %s\n", key)
		own := "--- FAIL: " + e.Test + " ("
		for _, o := range r.buf[key] {
			if !strings.HasPrefix(o, "=== ") && !strings.HasPrefix(o, own) {
				fmt.Fprint(r.out, o)
			}
		}
		delete(r.buf, key)
	}
}
