package sql_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgquectl/pgquectl/internal/install"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

func (e *engine) pending(q string) int64 {
	e.t.Helper()
	return e.int64(`SELECT pending_events FROM pgque.get_queue_info($1)`, q)
}

func (e *engine) consumerPending(q, c string) int64 {
	e.t.Helper()
	return e.int64(`SELECT pending_events FROM pgque.get_consumer_info($1, $2)`, q, c)
}

// guard runs the uninstall data guard (dry run: nothing changes) and
// returns its error.
func (e *engine) guard() error {
	e.t.Helper()
	conn := pgtest.Conn(e.t, e.dsn)
	_, err := install.Uninstall(ctxT(e.t), conn, install.UninstallOptions{DryRun: true})
	return err
}

func (e *engine) wantGuardRefuses(what string) {
	e.t.Helper()
	err := e.guard()
	if !errors.Is(err, install.ErrPendingEvents) {
		e.t.Fatalf("uninstall guard with %s: %v, want ErrPendingEvents", what, err)
	}
	if !strings.Contains(err.Error(), "q: ") {
		e.t.Fatalf("uninstall guard message does not name the queue: %v", err)
	}
}

// TestBatchPendingRetry: a retry due in an hour is pending data.
func TestBatchPendingRetry(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	e.exec(`SELECT pgque.send('q', 'later'::text)`)
	e.tick("q")
	ms := e.receive("q", "c", 10)
	if n := e.int64(`SELECT pgque.nack($1, ROW($2, $1, 'default', 'later', 0, now(), NULL, NULL, NULL, NULL)::pgque.message, '1 hour')`, ms[0].Batch, ms[0].ID); n != 1 {
		t.Fatalf("nack = %d", n)
	}
	e.exec(`SELECT pgque.ack($1)`, ms[0].Batch)
	e.tick("q")
	if p := e.pending("q"); p != 1 {
		t.Fatalf("queue pending_events with one retry due in 1 h = %d, want 1", p)
	}
	if p := e.consumerPending("q", "c"); p != 1 {
		t.Fatalf("consumer pending_events with one retry due in 1 h = %d, want 1", p)
	}
	e.wantGuardRefuses("a retry due in 1 h")
}

// TestBatchPendingDeadLetter: a dead letter is data the guard protects
// (pending_events does not count it: it is not waiting for delivery).
func TestBatchPendingDeadLetter(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_queue_config('q', 'max_retries', '0')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	e.exec(`SELECT pgque.send('q', 'poison'::text)`)
	e.tick("q")
	ms := e.receive("q", "c", 10)
	e.exec(`SELECT pgque.nack($1, ROW($2, $1, 'default', 'x', 0, now(), NULL, NULL, NULL, NULL)::pgque.message, '0', 'bad')`, ms[0].Batch, ms[0].ID)
	e.exec(`SELECT pgque.ack($1)`, ms[0].Batch)
	e.tick("q")
	if n := e.int64(`SELECT count(*) FROM pgque.dlq_inspect('q')`); n != 1 {
		t.Fatalf("dead letters = %d, want 1", n)
	}
	if p := e.pending("q"); p != 0 {
		t.Fatalf("pending_events = %d, want 0", p)
	}
	e.wantGuardRefuses("a dead letter")
	if !strings.Contains(e.guard().Error(), "1 dead letter") {
		t.Fatalf("guard message does not count the dead letter: %v", e.guard())
	}
	e.exec(`SELECT pgque.dlq_purge('q', '0')`)
	if err := e.guard(); err != nil {
		t.Fatalf("guard after the purge: %v", err)
	}
}

// TestBatchPendingCommittedAfterTick: an event whose id a tick counted but
// whose transaction committed after that tick waits for the next tick; it is
// pending, not 0, for the consumer that has read that tick and for a queue
// without consumers.
func TestBatchPendingCommittedAfterTick(t *testing.T) {
	for _, consumers := range []bool{true, false} {
		name := "no consumer"
		if consumers {
			name = "consumer at the tick"
		}
		t.Run(name, func(t *testing.T) {
			e := setup(t)
			e.exec(`SELECT pgque.create_queue('q')`)
			if consumers {
				e.exec(`SELECT pgque.subscribe('q', 'c')`)
			}
			p := pgtest.Conn(t, e.dsn)
			tx, err := p.Begin(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctxT(t), `SELECT pgque.send('q', 'late'::text)`); err != nil {
				t.Fatal(err)
			}
			e.tick("q") // counts the id, does not see the event
			if consumers {
				if got := e.drain("q", "c", 10); len(got) != 0 {
					t.Fatalf("drained %v before the commit", got)
				}
			}
			if err := tx.Commit(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if p := e.pending("q"); p != 1 {
				t.Fatalf("queue pending_events = %d, want 1 (committed after the tick that counted it)", p)
			}
			if consumers {
				if p := e.consumerPending("q", "c"); p != 1 {
					t.Fatalf("consumer pending_events = %d, want 1", p)
				}
			}
			e.wantGuardRefuses("an event committed after the last tick")
			if consumers {
				e.tick("q")
				exactlyOnce(t, e.drain("q", "c", 10), []string{"late"})
				if p := e.pending("q"); p != 0 {
					t.Fatalf("pending_events after it was read = %d, want 0", p)
				}
				if err := e.guard(); err != nil {
					t.Fatalf("guard after everything was read: %v", err)
				}
			}
		})
	}
}

// TestBatchPendingRolledBack: ids of a rolled-back transaction that a tick
// counted are no pending events once a later tick passed them.
func TestBatchPendingRolledBack(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	p := pgtest.Conn(t, e.dsn)
	tx, err := p.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t), `SELECT pgque.send_batch('q', ARRAY['x', 'y', 'z'])`); err != nil {
		t.Fatal(err)
	}
	e.tick("q")
	e.drain("q", "c", 10)
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if p := e.pending("q"); p != 0 {
		t.Fatalf("pending_events after a rollback = %d, want 0", p)
	}
	if err := e.guard(); err != nil {
		t.Fatalf("guard: %v", err)
	}
}

// TestBatchPendingRetryMovedBack: a due retry moved back into the event
// table (keeping its id) and not yet ticked is still pending.
func TestBatchPendingRetryMovedBack(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	e.exec(`SELECT pgque.send('q', 'again'::text)`)
	e.tick("q")
	ms := e.receive("q", "c", 10)
	e.exec(`SELECT pgque.nack($1, ROW($2, $1, 'default', 'again', 0, now(), NULL, NULL, NULL, NULL)::pgque.message, '0 seconds')`, ms[0].Batch, ms[0].ID)
	e.exec(`SELECT pgque.ack($1)`, ms[0].Batch)
	e.tick("q")
	e.drain("q", "c", 10)
	e.exec(`SELECT pgque.maint_retry_events()`)
	if n := e.int64(`SELECT count(*) FROM pgque.retry_queue`); n != 0 {
		t.Fatalf("retry_queue still holds %d rows after maint_retry_events", n)
	}
	if p := e.pending("q"); p != 1 {
		t.Fatalf("pending_events with a retry moved back, not yet ticked = %d, want 1", p)
	}
	e.tick("q")
	exactlyOnce(t, e.drain("q", "c", 10), []string{"again"})
	if p := e.pending("q"); p != 0 {
		t.Fatalf("pending_events after the retry was read = %d, want 0", p)
	}
}
