package sql_test

import (
	"testing"
)

// TestMessageUUIDIgnoresPlantedOperators: message_uuid has no pinned
// search_path (so that it inlines), so its body is parsed under the
// caller's. Operators planted in public with exact operand types (where
// pg_catalog's need an implicit cast) must not change its result.
func TestMessageUUIDIgnoresPlantedOperators(t *testing.T) {
	e := setup(t)
	const q = `SELECT pgque.message_uuid(1234567, 1125899906842629, '2026-12-01 10:00:00.123+00')::text`
	var want string
	if err := e.conn.QueryRow(ctxT(t), q).Scan(&want); err != nil {
		t.Fatal(err)
	}
	e.exec(`CREATE FUNCTION public.evil_bi(bigint, integer) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint'`)
	e.exec(`CREATE FUNCTION public.evil_ni(numeric, integer) RETURNS numeric LANGUAGE sql AS 'SELECT 0::numeric'`)
	e.exec(`CREATE OPERATOR public.& (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = public.evil_bi)`)
	e.exec(`CREATE OPERATOR public.| (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = public.evil_bi)`)
	e.exec(`CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.evil_ni)`)
	for _, path := range []string{"public", "public, pg_catalog"} {
		tx, err := e.conn.Begin(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctxT(t), `SELECT set_config('search_path', $1, true)`, path); err != nil {
			t.Fatal(err)
		}
		var got, control string
		if err := tx.QueryRow(ctxT(t), q).Scan(&got); err != nil {
			t.Fatal(err)
		}
		// The control proves the planted operators are reachable.
		if err := tx.QueryRow(ctxT(t), `SELECT (1125899906842629::bigint & 63)::text`).Scan(&control); err != nil {
			t.Fatal(err)
		}
		_ = tx.Rollback(ctxT(t))
		if control != "0" {
			t.Fatalf("search_path %q: the planted & was not chosen by a plain query (%s): the test proves nothing", path, control)
		}
		if got != want {
			t.Errorf("search_path %q: message_uuid = %s, want %s (a planted operator ran)", path, got, want)
		}
	}
}
