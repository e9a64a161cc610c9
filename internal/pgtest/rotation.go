package pgtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/locks"
)

// HeldRotation is a metadata rotation stopped before its COMMIT: the rows
// of a rotated family (pgque.group_cursor or pgque.subscription) moved to
// the next child and the old child TRUNCATEd, its ACCESS EXCLUSIVE lock
// still held. A reader started meanwhile waits for that lock; Commit lets
// it go on. Tests use it to check that such a reader does not read with a
// snapshot taken before the wait (TRUNCATE is not MVCC-safe: that snapshot
// sees the old child empty and the moved rows not yet committed).
type HeldRotation struct {
	t        testing.TB
	family   string
	hold     *pgx.Conn // the rotation's transaction
	mon      *pgx.Conn // reads pg_locks (outside that transaction)
	children []string
	open     bool
}

// HoldRotation rotates family ('group_cursor' or 'subscription', which
// must have a row) in a transaction it keeps open. It first makes the
// family's current child eligible: its rows are updated in place in one
// transaction until the child has 3 pages (the versions of a transaction
// in progress cannot be pruned), more than the 1 + 1 below which
// rotate_family leaves a child alone. Then, on a connection of its own, it
// takes the rotation's advisory lock (locks.MetadataRotation), as rotate_metadata
// does, so no other session's rotation runs meanwhile, and calls
// pgque.rotate_family with a transaction-id budget of 0 (rotate now).
func HoldRotation(t testing.TB, dsn, family string) *HeldRotation {
	t.Helper()
	prefix := map[string]string{"group_cursor": "gc", "subscription": "sub"}[family]
	if prefix == "" {
		t.Fatalf("pgtest: %q is not a rotated metadata family (group_cursor, subscription)", family)
	}
	h := &HeldRotation{t: t, family: family, hold: Conn(t, dsn), mon: Conn(t, dsn)}
	for g := 0; g < 3; g++ {
		h.children = append(h.children, fmt.Sprintf("pgque.%s_%d", family, g))
	}
	ctx := Ctx(t)
	// FAMILY and PREFIX: the two constants above.
	bloat := strings.NewReplacer("FAMILY", family, "PREFIX", prefix).Replace(`DO $bloat$
DECLARE
    v_child regclass := format('pgque.%I', 'FAMILY_' || pgque.FAMILY_gen())::regclass;
    v_n     int := 0;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgque.FAMILY) THEN
        RAISE EXCEPTION 'pgtest: pgque.FAMILY has no row to rotate';
    END IF;
    WHILE pg_relation_size(v_child) < 3 * current_setting('block_size')::int LOOP
        UPDATE pgque.FAMILY SET PREFIX_active = clock_timestamp();
        v_n := v_n + 1;
        IF v_n > 100000 THEN
            RAISE EXCEPTION 'pgtest: % still has % bytes after % updates', v_child, pg_relation_size(v_child), v_n;
        END IF;
    END LOOP;
END $bloat$`)
	// A fresh install's generation sequence has not been called: its first
	// nextval returns 0, the current generation, and that rotation would
	// move nothing. Draw it here (the current generation stays 0).
	if _, err := h.mon.Exec(ctx, `SELECT nextval(s) FROM (SELECT $1::regclass AS s) x WHERE pg_sequence_last_value(s) IS NULL`,
		"pgque."+family+"_gen_seq"); err != nil {
		t.Fatalf("pgtest: the %s generation sequence: %v", family, err)
	}
	if _, err := h.mon.Exec(ctx, bloat); err != nil {
		t.Fatalf("pgtest: growing the current %s child: %v", family, err)
	}
	if _, err := h.hold.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	h.open = true
	t.Cleanup(func() {
		if h.open {
			_, _ = h.hold.Exec(Ctx(t), `ROLLBACK`)
		}
	})
	if _, err := h.hold.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`, locks.ClassID, locks.MetadataRotation); err != nil {
		t.Fatalf("pgtest: the rotation's advisory lock: %v", err)
	}
	var moved int
	// rows per page 1,000,000: the live rows need one page, whatever their number.
	if err := h.hold.QueryRow(ctx, `SELECT pgque.rotate_family($1, 1000000, 0)`, family).Scan(&moved); err != nil {
		t.Fatalf("pgtest: rotate_family(%s): %v", family, err)
	}
	if moved < 1 {
		var state string
		_ = h.mon.QueryRow(ctx, strings.NewReplacer("FAMILY", family, "PREFIX", prefix).Replace(`SELECT format('current child %s, sizes %s, rows %s', pgque.FAMILY_gen(),
		        (SELECT string_agg(pg_relation_size(format('pgque.FAMILY_%s', g)::regclass)::text, ' ') FROM generate_series(0, 2) g),
		        (SELECT string_agg(format('%s %s/%s', tableoid::regclass, PREFIX_active, PREFIX_moved_at), ', ') FROM pgque.FAMILY))`)).Scan(&state)
		t.Fatalf("pgtest: rotate_family(%s) moved nothing: the held rotation holds no TRUNCATE (%s)", family, state)
	}
	return h
}

// Waiting reports whether a backend of this database whose query contains
// match waits for a lock on one of the family's children (the reader the
// test started). pg_locks lists the whole cluster: only this database's
// waits count.
func (h *HeldRotation) Waiting(match string) bool {
	h.t.Helper()
	const q = `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
	            WHERE NOT l.granted AND l.locktype = 'relation'
	              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	              AND l.relation = ANY ($1::regclass[]) AND strpos(a.query, $2) > 0`
	var n int
	if err := h.mon.QueryRow(Ctx(h.t), q, h.children, match).Scan(&n); err != nil {
		h.t.Fatalf("pgtest: reading pg_locks: %v", err)
	}
	return n > 0
}

// Commit commits the held rotation.
func (h *HeldRotation) Commit() {
	h.t.Helper()
	if _, err := h.hold.Exec(Ctx(h.t), `COMMIT`); err != nil {
		h.t.Fatalf("pgtest: committing the held %s rotation: %v", h.family, err)
	}
	h.open = false
}

// DuringRotation runs read on a goroutine of its own while h is held,
// waits until read's statement (its query containing match) waits for the
// rotation's lock, commits the rotation and returns what read returned.
// read must use a connection of its own (not h's). A read that ends
// without waiting fails the test (it checked nothing).
func DuringRotation[T any](t testing.TB, h *HeldRotation, match string, read func() (T, error)) T {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := read()
		ch <- result{v, err}
	}()
	for deadline := time.Now().Add(30 * time.Second); !h.Waiting(match); time.Sleep(5 * time.Millisecond) {
		select {
		case r := <-ch:
			t.Fatalf("the read (%q) ended without waiting for the held %s rotation: %v, %v", match, h.family, r.v, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no query containing %q waits for the held %s rotation after 30 s", match, h.family)
		}
	}
	h.Commit()
	r := <-ch
	if r.err != nil {
		t.Fatalf("the read (%q) behind the %s rotation: %v", match, h.family, r.err)
	}
	return r.v
}
