package sql_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// backendPid is the connection's backend pid.
func backendPid(t *testing.T, conn *pgx.Conn) int64 {
	t.Helper()
	return queryInt(t, conn, `SELECT pg_backend_pid()`)
}

// terminate ends the backend pid from conn and waits until it is gone
// (pg_terminate_backend only sends the signal).
func terminate(t *testing.T, conn *pgx.Conn, pid int64) {
	t.Helper()
	if queryInt(t, conn, `SELECT pg_terminate_backend($1::int)::int`, pid) != 1 {
		t.Fatalf("pg_terminate_backend(%d) failed", pid)
	}
	for deadline := time.Now().Add(30 * time.Second); queryInt(t, conn,
		`SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE pid = $1::int`, pid) != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("backend %d still there 30 s after pg_terminate_backend", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReceiveAgainSameSession: the session that received a delivery and
// asks again without an ack (PgQue's contract: a retry, a consumer loop
// that lost the reply) gets the same batch id and the same events, not
// 55P03; a smaller max_return shrinks the delivery to what it returns; a
// second live session is still refused; nothing is lost or acked twice.
func TestReceiveAgainSameSession(t *testing.T) {
	e := setup(t)
	want := e.tickedBatch(10)
	r := pgtest.Conn(t, e.dsn)
	first := receive(t, r, "q", "c", 6)
	if len(first) != 6 {
		t.Fatalf("receive: %d events, want 6", len(first))
	}
	again := receive(t, r, "q", "c", 6)
	if !slices.Equal(first, again) {
		t.Fatalf("receive again from the same session: %v, want the same delivery %v", again, first)
	}
	// A larger max_return returns the same delivery, not more.
	if more := receive(t, r, "q", "c", 100); !slices.Equal(first, more) {
		t.Fatalf("receive again with a larger max_return: %v, want the same delivery %v", more, first)
	}
	// Another live session is still refused.
	if _, err := tryReceive(ctxT(t), e.conn, "q", "c", 100); !isBusy(err) {
		t.Fatalf("second live session: %v, want 55P03", err)
	}
	// A smaller max_return: the first 4 of the delivery, same id; the ack
	// then acknowledges those 4 only.
	fewer := receive(t, r, "q", "c", 4)
	if !slices.Equal(first[:4], fewer) {
		t.Fatalf("receive again with max_return 4: %v, want the delivery's first 4 %v", fewer, first[:4])
	}
	if n := queryInt(t, r, `SELECT pgque.ack($1)`, first[0].Batch); n != 1 {
		t.Fatalf("ack = %d, want 1", n)
	}
	if n := queryInt(t, r, `SELECT pgque.ack($1)`, first[0].Batch); n != 0 {
		t.Fatalf("repeated ack = %d, want 0", n)
	}
	rest := receive(t, r, "q", "c", 100)
	if len(rest) != 6 || rest[0].Batch == first[0].Batch {
		t.Fatalf("after the ack: %d events under batch %d (acked %d), want m5..m10 under a new id", len(rest), rest[0].Batch, first[0].Batch)
	}
	if n := queryInt(t, r, `SELECT pgque.ack($1)`, rest[0].Batch); n != 1 {
		t.Fatalf("ack of the rest = %d", n)
	}
	exactlyOnce(t, append(msgPayloads(fewer), msgPayloads(rest)...), want)
	// The ack gave the reader lock back: the session holds none.
	if n := queryInt(t, r, `SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'`); n != 0 {
		t.Fatalf("the reader holds %d advisory locks after its acks, want 0", n)
	}
}

// TestReceiveAfterReaderTerminated: a reader session that ends without an
// ack (killed: pg_terminate_backend) does not stall its consumer for the
// lease: the next receive, from another session, gets its events at once
// under a new batch id, and the dead reader's id acks nothing. The readers
// are pgque_reader logins (no right to see each other's sessions in
// pg_stat_activity).
func TestReceiveAfterReaderTerminated(t *testing.T) {
	e := setup(t)
	want := e.tickedBatch(5)
	r1 := withUser(t, e.dsn, newRole(t, e.conn, "rd1", "IN ROLE pgque_reader"))
	r2 := withUser(t, e.dsn, newRole(t, e.conn, "rd2", "IN ROLE pgque_reader"))
	first := receive(t, r1, "q", "c", 100)
	if len(first) != 5 {
		t.Fatalf("receive: %d events, want 5", len(first))
	}
	if _, err := tryReceive(ctxT(t), r2, "q", "c", 100); !isBusy(err) {
		t.Fatalf("second reader while the first is alive: %v, want 55P03", err)
	}
	terminate(t, e.conn, backendPid(t, r1))
	again, err := tryReceive(ctxT(t), r2, "q", "c", 100)
	if err != nil {
		t.Fatalf("receive after the reader's session ended (lease 60 s): %v, want its events at once", err)
	}
	if strings.Join(msgPayloads(again), ",") != strings.Join(want, ",") || again[0].Batch == first[0].Batch {
		t.Fatalf("after the reader ended: %v under batch %d (dead reader's %d), want m1..m5 under a new id",
			msgPayloads(again), again[0].Batch, first[0].Batch)
	}
	if n := queryInt(t, r2, `SELECT pgque.ack($1)`, first[0].Batch); n != 0 {
		t.Fatalf("ack of the dead reader's id = %d, want 0", n)
	}
	if n := queryInt(t, r2, `SELECT pgque.ack($1)`, again[0].Batch); n != 1 {
		t.Fatalf("ack of the redelivery = %d, want 1", n)
	}
	e.tick("q")
	if more := receive(t, r2, "q", "c", 100); len(more) != 0 {
		t.Fatalf("after the ack: %d more events", len(more))
	}
}

// TestReceivePidReuseIsNotTheReader: a new session whose backend pid is
// the dead reader's (PostgreSQL reuses pids) is not that reader: it gets
// the events under a new batch id, not the old delivery as its own. The
// reuse is simulated by recording the new session's pid as the reader.
func TestReceivePidReuseIsNotTheReader(t *testing.T) {
	e := setup(t)
	e.tickedBatch(3)
	r := pgtest.Conn(t, e.dsn)
	first := receive(t, r, "q", "c", 100)
	if len(first) != 3 {
		t.Fatalf("receive: %d events, want 3", len(first))
	}
	terminate(t, e.conn, backendPid(t, r))
	e.exec(`SELECT setval(format('pgque.delivery_%s_reader', s.sub_id)::regclass, pg_backend_pid()) FROM pgque.subscription s`)
	again := e.receive("q", "c", 100)
	if len(again) != 3 || again[0].Batch == first[0].Batch {
		t.Fatalf("a new session with the dead reader's pid got %d events under batch %d (dead reader's %d), want 3 under a new id",
			len(again), again[0].Batch, first[0].Batch)
	}
}
