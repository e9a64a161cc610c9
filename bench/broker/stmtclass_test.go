package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// brokerStatement is the SQL string literal of dir/file that holds
// fragment, with its %d verbs (the generated functions' queue id and
// table number) filled in: the statement text pg_stat_statements
// records for it (the broker sends its parameters as $n).
func brokerStatement(t *testing.T, dir, file, fragment string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatalf("reading the broker's statement: %v", err)
	}
	s := string(src)
	i := strings.Index(s, fragment)
	if i < 0 {
		t.Fatalf("%s no longer holds %q: update this test to the statement the broker sends now", file, fragment)
	}
	start := strings.LastIndexByte(s[:i], '`')
	end := strings.IndexByte(s[i:], '`')
	if start < 0 || end < 0 {
		t.Fatalf("%s: %q is not in a `raw string`", file, fragment)
	}
	q := s[start+1 : i+end]
	for _, n := range []string{"12", "3"} {
		q = strings.Replace(q, "%d", n, 1)
	}
	return q
}

// TestStatementClass files the statements the broker sends, taken from
// internal/broker's source, under the report's columns: the fast paths'
// generated push_direct/ack_direct calls and their route look-ups with
// push and ack, not other.
func TestStatementClass(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "internal", "broker")
	for _, tc := range []struct {
		file, fragment, want string
	}{
		{"push.go", "FROM pgque.push(", "push"},
		{"push_direct.go", "FROM pgque.push_direct_q%d_t%d(", "push"},
		{"push_direct.go", "FROM pgque.push_route(", "push"},
		{"pop.go", "FROM pgque.pop_list(", "pop"},
		{"pop.go", "FROM pgque.pop_partition(", "pop"},
		{"pop_any.go", "FROM pgque.pop_any(", "pop"},
		{"pop_any.go", "FROM pgque.pop_by_label(", "pop"},
		{"reseed.go", "FROM pgque.group_reseed(", "reseed"},
		{"ack.go", "FROM pgque.group_ack(", "ack"},
		{"ack_direct.go", "FROM pgque.ack_direct_q%d_t%d(", "ack"},
		{"ack_direct.go", "FROM pgque.ack_route(", "ack"},
		{"lease_extend.go", "FROM pgque.group_lease_extend(", "other"},
		{"../ticker/ticker.go", "ELSE pgque.ticker() END", "tick"},
	} {
		q := brokerStatement(t, dir, tc.file, tc.fragment)
		if got := statementClass(q); got != tc.want {
			t.Errorf("%s %q: class %q, want %q; statement:\n%s", tc.file, tc.fragment, got, tc.want, q)
		}
	}
}

// TestStatementLegendOfOldResults: a results.json written before the
// direct calls were grouped re-renders with its groups as they were and
// says where those calls are.
func TestStatementLegendOfOldResults(t *testing.T) {
	t.Parallel()
	cell := &Cell{Name: "latency-off", Kind: "latency", Status: StatusMeasured, Statements: map[string]*StmtStats{
		"push": {Calls: 5, TotalMs: 55}, "other": {Calls: 25566, TotalMs: 6390}, "broker_tick": {Calls: 4, TotalMs: 1}}}
	old := renderReport(&Results{Cells: []*Cell{cell}})
	if !strings.Contains(old, "| latency-off | 5 / 55 | — | — | — | — | 25570 / 6391 |") || !strings.Contains(old, "are under other") {
		t.Errorf("old results.json's statements table:\n%s", old)
	}
	now := renderReport(&Results{Cells: []*Cell{cell}, StatementGroups: statementGroups})
	if strings.Contains(now, "are under other") || !strings.Contains(now, "`push_direct_q<id>_t<n>`") {
		t.Errorf("this run's statements legend:\n%s", now)
	}
}
