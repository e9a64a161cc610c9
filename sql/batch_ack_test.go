package sql_test

import (
	"fmt"
	"strings"
	"testing"
)

// payloads returns m1..mn.
// tickedBatch creates queue q with consumer c, sends n payloads (m1..mn) in
// one transaction and ticks, so that c's next receive gets them as a batch.
func (e *engine) tickedBatch(n int) []string {
	e.t.Helper()
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	want := payloads(n)
	e.exec(`SELECT pgque.send_batch('q', $1::text[])`, want)
	e.tick("q")
	return want
}

func payloads(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%d", i+1)
	}
	return out
}

func msgPayloads(ms []msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Payload
	}
	return out
}

// TestBatchRepeatedAckSkipsNothing: a client that retries an ack whose
// reply was lost must not finish the batch past events it never received.
func TestBatchRepeatedAckSkipsNothing(t *testing.T) {
	e := setup(t)
	want := e.tickedBatch(20)

	first := e.receive("q", "c", 7)
	if got := strings.Join(msgPayloads(first), ","); got != strings.Join(want[:7], ",") {
		t.Fatalf("receive(q, c, 7) = %s, want m1..m7", got)
	}
	b := first[0].Batch
	if n := e.int64(`SELECT pgque.ack($1)`, b); n != 1 {
		t.Fatalf("first ack(%d) = %d, want 1", b, n)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, b); n != 0 {
		t.Errorf("repeated ack(%d) = %d, want 0", b, n)
	}
	rest := e.receive("q", "c", 100)
	if got := strings.Join(msgPayloads(rest), ","); got != strings.Join(want[7:], ",") {
		t.Fatalf("receive after the repeated ack = [%s], want m8..m20 (lost = %d)", got, 13-len(rest))
	}
	if rest[0].Batch == b {
		t.Fatalf("the second delivery reuses batch id %d", b)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, rest[0].Batch); n != 1 {
		t.Fatalf("ack of the rest = %d, want 1", n)
	}
	for _, id := range []int64{b, rest[0].Batch} {
		if n := e.int64(`SELECT pgque.ack($1)`, id); n != 0 {
			t.Fatalf("ack(%d) after the batch was finished = %d, want 0", id, n)
		}
	}
	e.tick("q")
	if more := e.receive("q", "c", 100); len(more) != 0 {
		t.Fatalf("after everything was acked, receive returned %d events", len(more))
	}
	exactlyOnce(t, append(msgPayloads(first), msgPayloads(rest)...), want)
}

// TestBatchReceiveMaxInt: i_max_return may be any positive int.
func TestBatchReceiveMaxInt(t *testing.T) {
	e := setup(t)
	want := e.tickedBatch(5)
	ms := e.receive("q", "c", 2147483647)
	exactlyOnce(t, msgPayloads(ms), want)
	if n := e.int64(`SELECT pgque.ack($1)`, ms[0].Batch); n != 1 {
		t.Fatalf("ack = %d", n)
	}
}

// TestBatchNackUnknownBatch: PgQue 0.2 raises "batch not found" and clients
// match on it.
func TestBatchNackUnknownBatch(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	err := e.sqlErr(`SELECT pgque.nack(987654, ROW(1, 987654, 'default', 'x', 0, now(), NULL, NULL, NULL, NULL)::pgque.message)`)
	if !strings.HasPrefix(err.Message, "batch not found") {
		t.Fatalf("nack of an unknown batch: %q, want a message starting with \"batch not found\"", err.Message)
	}
	// A finished batch is unknown too.
	e.exec(`SELECT pgque.send('q', 'a'::text)`)
	e.tick("q")
	ms := e.receive("q", "c", 10)
	e.exec(`SELECT pgque.ack($1)`, ms[0].Batch)
	err = e.sqlErr(`SELECT pgque.nack($1, ROW($2, $1, 'default', 'a', 0, now(), NULL, NULL, NULL, NULL)::pgque.message)`, ms[0].Batch, ms[0].ID)
	if !strings.HasPrefix(err.Message, "batch not found") {
		t.Fatalf("nack of a finished batch: %q, want \"batch not found...\"", err.Message)
	}
}

// TestBatchBadInput: 2-D payload arrays and over-long consumer names get a
// clear error and change nothing.
func TestBatchBadInput(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	seq := func() int64 { return e.int64(`SELECT coalesce(pg_sequence_last_value('pgque.event_1_id_seq'), 0)`) }
	before := seq()
	for _, sql := range []string{
		`SELECT pgque.send_batch('q', ARRAY[['a', 'b'], ['c', 'd']]::text[])`,
		`SELECT pgque.send_batch('q', 't', ARRAY[['a', 'b']]::text[])`,
		`SELECT pgque.send_batch('q', ARRAY[['{}', '{}']]::jsonb[])`,
	} {
		err := e.sqlErr(sql)
		if !strings.Contains(err.Message, "one-dimensional") {
			t.Errorf("%s: %s %q, want a clear one-dimensional error", sql, err.Code, err.Message)
		}
	}
	if n := e.int64(`SELECT count(*) FROM pgque.event_1_0`) + e.int64(`SELECT count(*) FROM pgque.event_1_1`) + e.int64(`SELECT count(*) FROM pgque.event_1_2`); n != 0 {
		t.Fatalf("refused send_batch wrote %d rows", n)
	}
	if after := seq(); after != before {
		t.Fatalf("refused send_batch moved the event sequence from %d to %d", before, after)
	}

	long := strings.Repeat("x", 4096)
	err := e.sqlErr(`SELECT pgque.subscribe('q', $1)`, long)
	if err.Code != "22023" || !strings.Contains(err.Message, "limit is 255") {
		t.Fatalf("4 kB consumer name: %s %q, want 22023 with the limit", err.Code, err.Message)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.consumer`) + e.int64(`SELECT count(*) FROM pgque.subscription`); n != 0 {
		t.Fatalf("refused subscribe left %d consumer/subscription rows", n)
	}
	if n := e.int64(`SELECT pgque.subscribe('q', $1)`, strings.Repeat("y", 255)); n != 1 {
		t.Fatalf("a 255-byte consumer name: subscribe = %d, want 1", n)
	}
	err = e.sqlErr(`SELECT pgque.create_queue($1)`, long)
	if err.Code != "P0001" {
		t.Fatalf("4 kB queue name: %s %q, want P0001 (as PgQue)", err.Code, err.Message)
	}
}

// TestBatchStatusCompat: PgQue 0.2's status() rows 'pgque' (detail =
// version()) and 'postgresql'.
func TestBatchStatusCompat(t *testing.T) {
	e := setup(t)
	var detail string
	if err := e.conn.QueryRow(ctxT(t), `SELECT detail FROM pgque.status() WHERE component = 'pgque'`).Scan(&detail); err != nil {
		t.Fatalf("status() has no 'pgque' row: %v", err)
	}
	if v := e.int64(`SELECT count(*) FROM pgque.status() WHERE component = 'pgque' AND detail = pgque.version()`); v != 1 {
		t.Fatalf("status() 'pgque' detail = %q, want pgque.version()", detail)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.status() WHERE component = 'postgresql' AND detail = version()`); n != 1 {
		t.Fatalf("status() has %d 'postgresql' rows with detail = version(), want 1", n)
	}
}

// TestBatchStatusJobNamesAreLiteral: '_' in the database name is not a
// wildcard when status() counts this database's pg_cron jobs. (A stand-in
// cron.job table: status() only reads jobname.)
func TestBatchStatusJobNamesAreLiteral(t *testing.T) {
	e := setup(t)
	var db string
	if err := e.conn.QueryRow(ctxT(t), `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(db, "_") {
		t.Fatalf("database name %q has no '_' to test with", db)
	}
	other := strings.ReplaceAll(db, "_", "x") // another database that LIKE '%_%' would match
	e.exec(`CREATE SCHEMA cron`)
	e.exec(`CREATE TABLE cron.job (jobid bigserial, jobname text)`)
	e.exec(`INSERT INTO cron.job (jobname) VALUES ($1), ($2), ($3)`,
		"pgque_ticker@"+other, "pgque_maint@"+other, "pgque_ticker@x@"+db)
	var status, detail string
	if err := e.conn.QueryRow(ctxT(t), `SELECT status, detail FROM pgque.status() WHERE component = 'pg_cron'`).Scan(&status, &detail); err != nil {
		t.Fatal(err)
	}
	if detail != "0 pgque job(s) registered" || status != "WARN" {
		t.Fatalf("status() pg_cron row = %s %q, want WARN with 0 jobs (the jobs belong to other databases)", status, detail)
	}
	e.exec(`INSERT INTO cron.job (jobname) VALUES ($1)`, "pgque_ticker@"+db)
	if err := e.conn.QueryRow(ctxT(t), `SELECT status, detail FROM pgque.status() WHERE component = 'pg_cron'`).Scan(&status, &detail); err != nil {
		t.Fatal(err)
	}
	if detail != "1 pgque job(s) registered" || status != "OK" {
		t.Fatalf("status() pg_cron row = %s %q, want OK with 1 job", status, detail)
	}
}
