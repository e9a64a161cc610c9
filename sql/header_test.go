package sql_test

import (
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"testing"

	enginesql "github.com/pgquectl/pgquectl/sql"
)

var createRe = regexp.MustCompile(`(?m)^CREATE OR REPLACE (?:FUNCTION|PROCEDURE) pgque\.(\w+)\(`)

// header is the comment block a SQL file starts with.
func header(body string) string {
	var b strings.Builder
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestEveryFunctionHasAMatchingHeader checks the SQL style rule: each
// function's file starts with a header that names it with its real
// parameters, and says what it locks and who calls it.
func TestEveryFunctionHasAMatchingHeader(t *testing.T) {
	e := setup(t)
	headers := map[string]string{} // function name -> header of the file creating it
	files := map[string]string{}
	names, err := enginesql.ManifestFiles(enginesql.SectionInstall)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		body, err := fs.ReadFile(enginesql.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		h := header(string(body))
		if h == "" {
			t.Errorf("%s: no header comment", name)
		}
		for _, m := range createRe.FindAllStringSubmatch(string(body), -1) {
			if prev, ok := files[m[1]]; ok && prev != name {
				t.Errorf("pgque.%s is created in %s and %s: one function per file", m[1], prev, name)
			}
			files[m[1]] = name
			headers[m[1]] = h
		}
	}
	rows, err := e.conn.Query(ctxT(t), `
		SELECT p.proname, coalesce(p.proargnames, '{}'), coalesce(p.proargmodes::text[], '{}')
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname = 'pgque'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var seen []string
	for rows.Next() {
		var name string
		var args, modes []string
		if err := rows.Scan(&name, &args, &modes); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, name)
		h, ok := headers[name]
		if !ok {
			t.Errorf("pgque.%s exists but no file creates it with CREATE OR REPLACE", name)
			continue
		}
		if !strings.Contains(h, "pgque."+name+"(") {
			t.Errorf("%s: header does not name pgque.%s(...)", files[name], name)
		}
		for i, a := range args {
			if i < len(modes) && (modes[i] == "o" || modes[i] == "t") {
				continue // OUT / TABLE columns are described as the result
			}
			if !strings.Contains(h, a) {
				t.Errorf("%s: header of pgque.%s does not mention its parameter %s", files[name], name, a)
			}
		}
		if !strings.Contains(h, "Called by") {
			t.Errorf("%s: header of pgque.%s does not say who calls it", files[name], name)
		}
		if !strings.Contains(h, "Lock") && !strings.Contains(h, "lock") {
			t.Errorf("%s: header of pgque.%s does not say what it locks", files[name], name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(seen)
	if len(seen) < 40 {
		t.Fatalf("only %d functions found: %v", len(seen), seen)
	}
}
