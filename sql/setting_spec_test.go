package sql_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	enginesql "github.com/pgquectl/pgquectl/sql"
)

// specRow is one row of pgque.setting_spec().
type specRow struct {
	name, kind  string
	def, lo, hi *string
}

func settingSpec(t *testing.T, e *engine) []specRow {
	t.Helper()
	rows, err := e.conn.Query(ctxT(t), `SELECT name, kind, default_value, min_value, max_value FROM pgque.setting_spec() ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var spec []specRow
	for rows.Next() {
		var r specRow
		if err := rows.Scan(&r.name, &r.kind, &r.def, &r.lo, &r.hi); err != nil {
			t.Fatal(err)
		}
		spec = append(spec, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestSettingSpecIsWhatSetSettingEnforces: every setting is seeded from
// pgque.setting_spec() with its default; set_setting(NULL) resets to that
// default; each range's bounds are accepted and the values just outside
// them rejected (22023), for set_setting and, for the tick period, for
// set_queue_config and set_tick_period_ms (whose hint names the range).
func TestSettingSpecIsWhatSetSettingEnforces(t *testing.T) {
	e := setup(t)
	spec := settingSpec(t, e)
	if n := e.int64(`SELECT count(*) FROM pgque.settings`); n != int64(len(spec)) {
		t.Fatalf("pgque.settings has %d rows, setting_spec() %d", n, len(spec))
	}
	for _, s := range spec {
		if n := e.int64(`SELECT count(*) FROM pgque.settings WHERE name = $1 AND value IS NOT DISTINCT FROM $2`, s.name, s.def); n != 1 {
			t.Errorf("%s: not seeded with its default %v", s.name, s.def)
		}
		var inside, outside []string
		switch s.kind {
		case "int":
			lo, _ := strconv.Atoi(*s.lo)
			hi, _ := strconv.Atoi(*s.hi)
			inside = []string{*s.lo, *s.hi}
			outside = []string{strconv.Itoa(lo - 1), strconv.Itoa(hi + 1), "x"}
		case "float":
			inside = []string{*s.lo, *s.hi}
			outside = []string{fmt.Sprint(mustFloat(t, *s.lo) - 0.5), fmt.Sprint(mustFloat(t, *s.hi) + 0.5), "x"}
		case "interval":
			inside = []string{*s.lo, "1 hour"}
			outside = []string{"-1 second", "x"}
		case "bool":
			inside = []string{"true", "false"}
			outside = []string{"maybe"}
		default:
			t.Errorf("%s: unknown kind %q", s.name, s.kind)
		}
		for _, v := range inside {
			if _, err := e.conn.Exec(ctxT(t), `SELECT pgque.set_setting($1, $2)`, s.name, v); err != nil {
				t.Errorf("set_setting(%s, %s) rejected: %v", s.name, v, err)
			}
		}
		for _, v := range outside {
			if err := e.sqlErr(`SELECT pgque.set_setting($1, $2)`, s.name, v); err.Code != "22023" {
				t.Errorf("set_setting(%s, %s) = %v, want 22023", s.name, v, err)
			}
		}
		e.exec(`SELECT pgque.set_setting($1, NULL)`, s.name)
		if n := e.int64(`SELECT count(*) FROM pgque.settings WHERE name = $1 AND value IS NOT DISTINCT FROM $2`, s.name, s.def); n != 1 {
			t.Errorf("%s: set_setting(NULL) did not reset it to %v", s.name, s.def)
		}
	}

	// The tick period's range, per queue and through the PgQue setter.
	var lo, hi int
	if err := e.conn.QueryRow(ctxT(t), `SELECT min_value::int, max_value::int FROM pgque.setting_spec() WHERE name = 'tick_period_ms'`).Scan(&lo, &hi); err != nil {
		t.Fatal(err)
	}
	e.exec(`SELECT pgque.create_queue('spec_q')`)
	for v, ok := range map[int]bool{lo: true, hi: true, lo - 1: false, hi + 1: false} {
		_, err := e.conn.Exec(ctxT(t), `SELECT pgque.set_queue_config('spec_q', 'tick_period_ms', $1::int::text)`, v)
		if ok != (err == nil) {
			t.Errorf("set_queue_config tick_period_ms %d: %v, want accepted=%v", v, err, ok)
		}
		_, err = e.conn.Exec(ctxT(t), `SELECT pgque.set_tick_period_ms($1)`, v)
		if ok != (err == nil) {
			t.Errorf("set_tick_period_ms(%d): %v, want accepted=%v", v, err, ok)
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && !strings.Contains(pe.Hint, fmt.Sprintf("%d..%d ms", lo, hi)) {
			t.Errorf("set_tick_period_ms(%d) hint %q does not name the range", v, pe.Hint)
		}
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSettingRangesHaveOneHome fails when a setting's range is written
// again outside pgque.setting_spec(): as "BETWEEN lo AND hi" or "lo..hi" in
// an engine file or a Go source file that names the setting.
func TestSettingRangesHaveOneHome(t *testing.T) {
	e := setup(t)
	files := map[string]string{}
	for _, n := range manifestPaths(t) {
		if n == "engine/050_setting_spec.sql" {
			continue
		}
		b, err := fs.ReadFile(enginesql.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		files["sql/"+n] = string(b)
	}
	for _, dir := range []string{"../cmd", "../internal"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			files[strings.TrimPrefix(filepath.ToSlash(p), "../")] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range settingSpec(t, e) {
		if s.lo == nil || s.hi == nil {
			continue
		}
		lo, hi := regexp.QuoteMeta(*s.lo), regexp.QuoteMeta(*s.hi)
		again := regexp.MustCompile(`(?i)\bBETWEEN\s+` + lo + `\s+AND\s+` + hi + `\b|\b` + lo + `\.\.` + hi + `\b`)
		for name, text := range files {
			if strings.Contains(text, s.name) {
				if m := again.FindString(text); m != "" {
					t.Errorf("%s names setting %s and writes its range again (%q): read it from pgque.setting_spec()", name, s.name, m)
				}
			}
		}
	}
}
