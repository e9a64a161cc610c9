package sql_test

import (
	"testing"
)

// TestPushAndTickNotReplanned: once a session has pushed and ticked a few
// times, a further push plans no statement over the event table (its
// INSERT runs in the queue's generated push_fresh function; an EXECUTEd
// INSERT was planned on every call) and a further broker_tick does not
// plan tick_in_flight's pg_locks statement again (with its parameters
// visible, PL/pgSQL priced custom plans lower and re-planned it on every
// tick). Checked with debug_print_plan like TestGroupPlansNotReplanned;
// the positive controls prove the check sees both kinds of plan.
func TestPushAndTickNotReplanned(t *testing.T) {
	e := setup(t)
	push := `SELECT count(*) FROM pgque.push(ARRAY['pt'], ARRAY['p1'], ARRAY['{"n":1}'::jsonb], NULL)`
	e.exec(push)
	var cur, queue uint32
	if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.event_table(q.queue_id, q.queue_cur_table)::regclass::oid,
	        'pgque.queue'::regclass::oid FROM pgque.queue q WHERE q.queue_name = 'pt'`).Scan(&cur, &queue); err != nil {
		t.Fatal(err)
	}
	log := &planLog{}
	conn := log.conn(t, e.dsn)
	round := func() {
		t.Helper()
		if _, err := conn.Exec(ctxT(t), push); err != nil {
			t.Fatal(err)
		}
		var tick *int64
		if err := conn.QueryRow(ctxT(t), `SELECT pgque.broker_tick('pt')`).Scan(&tick); err != nil {
			t.Fatal(err)
		}
		if tick == nil {
			t.Fatal("broker_tick made no tick")
		}
	}
	// First calls: the session plans (and caches) everything; PL/pgSQL
	// makes up to five custom plans before it settles on the generic one.
	for i := 0; i < 8; i++ {
		round()
	}
	for _, s := range []string{`SET debug_print_plan = on`, `SET client_min_messages = log`} {
		if _, err := conn.Exec(ctxT(t), s); err != nil {
			t.Fatal(err)
		}
	}
	from := log.len()
	for i := 0; i < 3; i++ {
		round()
	}
	if n, total := log.naming(from, cur); n != 0 {
		t.Errorf("3 pushes, called again in the session, planned %d statements over the event table (of %d plans made), want 0", n, total)
	}
	// (tick_in_flight's statement reads pgque.queue; so do push's and
	// broker_tick's other statements, all cached)
	if n, total := log.naming(from, queue); n != 0 {
		t.Errorf("3 pushes and broker ticks, called again in the session, planned %d statements over pgque.queue (of %d plans made), want 0", n, total)
	}
	// Positive controls: plans over the event table and pgque.queue are seen.
	from = log.len()
	if _, err := conn.Exec(ctxT(t), `SELECT count(*) FROM `+queryText(t, e.conn, `SELECT $1::oid::regclass::text`, cur)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctxT(t), `SELECT count(*) FROM pgque.queue WHERE queue_name = 'x'`); err != nil {
		t.Fatal(err)
	}
	if n, _ := log.naming(from, cur); n != 1 {
		t.Errorf("control: a count(*) over the event table logged %d plans naming it, want 1", n)
	}
	if n, _ := log.naming(from, queue); n != 1 {
		t.Errorf("control: a count(*) over pgque.queue logged %d plans naming it, want 1", n)
	}
}
