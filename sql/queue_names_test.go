package sql_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// Long queue names (the broker's: up to 322 bytes, a tenant + U+241F + a
// 255-byte name): nothing derived from the name overflows or collides. Two
// names that share their first 63 bytes get their own NOTIFY channel, tick
// lock, tables and generated functions; names up to 57 bytes keep PgQue's
// channel pgque_<name>.
func TestLongQueueNamesDeriveChannelsAndKeysApart(t *testing.T) {
	e := setup(t)
	prefix := strings.Repeat("t", 64) + "\u241f" + "Ω "
	a := prefix + strings.Repeat("a", 322-len(prefix))
	b := prefix + strings.Repeat("a", 322-len(prefix)-1) + "b"
	for _, name := range []string{a, b} {
		if n := e.int64(`SELECT pgque.broker_create_queue($1)`, name); n != 1 {
			t.Fatalf("broker_create_queue(%d bytes) = %d", len(name), n)
		}
	}
	if err := e.sqlErr(`SELECT pgque.broker_create_queue($1)`, a+"x"); err.Code != "22023" || !strings.Contains(err.Message, "323 bytes") {
		t.Fatalf("323-byte name: %s %s", err.Code, err.Message)
	}
	// create_queue refuses a name too long for its channel with P0001
	// (raise_exception), as PgQue does: PgQue clients catch that.
	if err := e.sqlErr(`SELECT pgque.create_queue($1)`, strings.Repeat("x", 58)); err.Code != "P0001" || !strings.Contains(err.Message, "the limit is 57") {
		t.Fatalf("create_queue (PgQue API) of a 58-byte name: %s %s", err.Code, err.Message)
	}
	short := strings.Repeat("s", 57)
	e.exec(`SELECT pgque.create_queue($1)`, short)

	channel := func(name string) string {
		var c string
		if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.queue_channel($1)`, name).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	sum := sha256.Sum256([]byte(a))
	if got, want := channel(a), "pgque."+hex.EncodeToString(sum[:])[:32]; got != want {
		t.Fatalf("channel of a 322-byte name: %q, want %q", got, want)
	}
	if got := channel(short); got != "pgque_"+short {
		t.Fatalf("channel of a 57-byte name: %q, want pgque_<name>", got)
	}
	if ca, cb := channel(a), channel(b); ca == cb || len(ca) > 63 || len(cb) > 63 || ca == "pgque.broker" || ca == "pgque.hotlist" {
		t.Fatalf("channels %q and %q: must differ, fit 63 bytes and miss the broker's channels", ca, cb)
	}

	// Each long queue notifies on its own channel, in tick order.
	listener := pgtest.Conn(t, e.dsn)
	for _, name := range []string{a, b} {
		if _, err := listener.Exec(ctxT(t), `LISTEN `+pgx.Identifier{channel(name)}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]int64{}
	for _, name := range []string{a, b} {
		e.exec(`SELECT pgque.send($1, 'x'::text)`, name)
		ids[name] = e.tick(name)
	}
	for _, name := range []string{a, b} {
		ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
		n, err := listener.WaitForNotification(ctx)
		cancel()
		if err != nil {
			t.Fatalf("waiting for the tick of the %q... queue: %v", name[:70], err)
		}
		if n.Channel != channel(name) || n.Payload != strconv.FormatInt(ids[name], 10) {
			t.Fatalf("notification %q %q, want %q %d", n.Channel, n.Payload, channel(name), ids[name])
		}
	}

	// The tick lock is per queue id: holding a's does not stop b's tick.
	var qa, qb int64
	if err := e.conn.QueryRow(ctxT(t), `SELECT (SELECT queue_id FROM pgque.queue WHERE queue_name = $1),
	        (SELECT queue_id FROM pgque.queue WHERE queue_name = $2)`, a, b).Scan(&qa, &qb); err != nil {
		t.Fatal(err)
	}
	holder := pgtest.Conn(t, e.dsn)
	tx, err := holder.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctxT(t), `SELECT pg_advisory_xact_lock(1885827446, $1::int)`, qa); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{a, b} {
		e.exec(`SELECT pgque.send($1, 'y'::text)`, name)
		e.exec(`SELECT pgque.force_next_tick($1)`, name)
	}
	if id := e.int64(`SELECT pgque.ticker($1)`, b); id < 0 {
		t.Fatalf("b did not tick while a's tick lock was held")
	}
	if n := e.int64(`SELECT count(*) FROM pg_proc WHERE pronamespace = 'pgque'::regnamespace AND proname ~ ('_q' || $1::int || '_t[0-9]+$')`, qb); n == 0 {
		t.Fatalf("no generated functions named by queue id %d", qb)
	}
	if n := e.int64(`SELECT count(*) FROM pg_proc WHERE pronamespace = 'pgque'::regnamespace AND proname ~ ('_q' || $1::int || '_t[0-9]+$')`, qa); n == 0 {
		t.Fatalf("no generated functions named by queue id %d", qa)
	}
}

// An install from before long names (constraint queue_name_length, 57
// bytes) is upgraded in place by running the install script again.
func TestInstallUpgradesQueueNameLimit(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`ALTER TABLE pgque.queue DROP CONSTRAINT queue_name_bytes,
	        ADD CONSTRAINT queue_name_length CHECK (octet_length(queue_name) BETWEEN 1 AND 57)`)
	if err := e.sqlErr(`SELECT pgque.broker_create_queue($1)`, strings.Repeat("x", 100)); err.Code != "23514" {
		t.Fatalf("the old constraint did not hold: %s %s", err.Code, err.Message)
	}
	if _, err := install.Install(ctxT(t), e.conn, install.Options{Reinstall: true}); err != nil {
		t.Fatal(err)
	}
	if n := e.int64(`SELECT pgque.broker_create_queue($1)`, strings.Repeat("x", 322)); n != 1 {
		t.Fatalf("322-byte name after the upgrade: %d", n)
	}
	var defs string
	if err := e.conn.QueryRow(ctxT(t), `SELECT string_agg(conname, ',' ORDER BY conname) FROM pg_constraint
	        WHERE conrelid = 'pgque.queue'::regclass AND contype = 'c'`).Scan(&defs); err != nil {
		t.Fatal(err)
	}
	if defs != "queue_name_bytes" {
		t.Fatalf("check constraints after the upgrade: %s", defs)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.queue WHERE queue_name = 'q'`); n != 1 {
		t.Fatal("the upgrade lost a queue")
	}
}
