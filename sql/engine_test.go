package sql_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

func TestSnapshotRuleSameTransactionSeesNothing(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)

	tx, err := e.conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t), `SELECT pgque.send('q', '{"n":1}'::jsonb)`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t), `SELECT pgque.force_next_tick('q'), pgque.ticker('q')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctxT(t), `SELECT count(*) FROM pgque.receive('q', 'c', 10)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("receive in the sending transaction returned %d events, want 0", n)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	e.tick("q")
	exactlyOnce(t, e.drain("q", "c", 10), []string{`{"n": 1}`})
	e.tick("q")
	if got := e.drain("q", "c", 10); len(got) != 0 {
		t.Fatalf("after the event was acked, receive returned %v", got)
	}
}

func TestConcurrentProducersCommitOutOfOrder(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	p1 := pgtest.Conn(t, e.dsn)
	p2 := pgtest.Conn(t, e.dsn)

	for round := 0; round < 5; round++ {
		a := fmt.Sprintf(`"a%d"`, round)
		b := fmt.Sprintf(`"b%d"`, round)
		tx1, err := p1.Begin(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		// tx1 takes the lower ev_id but commits last, after two ticks.
		if _, err := tx1.Exec(ctxT(t), `SELECT pgque.send('q', $1::jsonb)`, a); err != nil {
			t.Fatal(err)
		}
		if _, err := p2.Exec(ctxT(t), `SELECT pgque.send('q', $1::jsonb)`, b); err != nil {
			t.Fatal(err)
		}
		e.tick("q")
		got := e.drain("q", "c", 100)
		e.tick("q")
		got = append(got, e.drain("q", "c", 100)...)
		if err := tx1.Commit(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		e.tick("q")
		got = append(got, e.drain("q", "c", 100)...)
		exactlyOnce(t, got, []string{a, b})
	}
}

func TestFanOutConsumersAreIndependent(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c1')`)
	e.exec(`SELECT pgque.subscribe('q', 'c2')`)
	e.exec(`SELECT pgque.send_batch('q', ARRAY['1','2','3']::text[])`)
	e.tick("q")
	got1 := e.drain("q", "c1", 10)
	exactlyOnce(t, got1, []string{"1", "2", "3"})
	// c1's ack did not move c2.
	got2 := e.drain("q", "c2", 10)
	exactlyOnce(t, got2, []string{"1", "2", "3"})
}

func TestNoSilentSkip(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	var want []string
	for i := 1; i <= 25; i++ {
		want = append(want, fmt.Sprint(i))
	}
	e.exec(`SELECT pgque.send_batch('q', $1::text[])`, want)
	e.tick("q")
	var got []string
	var batches []int64
	for i := 0; i < 10; i++ {
		ms := e.receive("q", "c", 10)
		if len(ms) == 0 {
			break
		}
		if len(ms) > 10 {
			t.Fatalf("receive(q, c, 10) returned %d rows", len(ms))
		}
		for _, m := range ms {
			got = append(got, m.Payload)
		}
		batches = append(batches, ms[0].Batch)
		if n := e.int64(`SELECT pgque.ack($1)`, ms[0].Batch); n != 1 {
			t.Fatalf("ack = %d", n)
		}
	}
	exactlyOnce(t, got, want)
	if len(batches) != 3 {
		t.Fatalf("took %d receive/ack rounds (%v), want 3 (10 + 10 + 5)", len(batches), batches)
	}
	for i, w := range want {
		if got[i] != w {
			t.Fatalf("order: got %v", got)
		}
	}
}

func TestReceiveSpansManyTicks(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	e.exec(`SELECT pgque.subscribe('q', 'classic')`)
	var want []string
	for tk := 0; tk < 20; tk++ {
		for j := 0; j <= tk%3; j++ {
			p := fmt.Sprintf("t%d-%d", tk, j)
			want = append(want, p)
			e.exec(`SELECT pgque.send('q', $1::text)`, p)
		}
		e.tick("q")
	}
	ms := e.receive("q", "c", 100)
	if len(ms) != len(want) {
		t.Fatalf("one receive(max 100) returned %d events, want all %d", len(ms), len(want))
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Payload)
		if m.Batch != ms[0].Batch {
			t.Fatalf("events came from several batches")
		}
	}
	exactlyOnce(t, got, want)
	if e.int64(`SELECT pgque.ack($1)`, ms[0].Batch) != 1 {
		t.Fatal("ack failed")
	}

	// next_batch still opens one tick per batch.
	batches := 0
	for {
		b := e.int64(`SELECT pgque.next_batch('q', 'classic')`)
		if b < 0 {
			break
		}
		batches++
		n := e.int64(`SELECT count(*) FROM pgque.get_batch_events($1)`, b)
		if n < 1 || n > 3 {
			t.Fatalf("next_batch batch %d has %d events, want one tick's 1..3", b, n)
		}
		e.exec(`SELECT pgque.finish_batch($1)`, b)
	}
	if batches != 20 {
		t.Fatalf("next_batch opened %d batches, want 20 (one per tick)", batches)
	}
}

func TestNackRetryAndDeadLetter(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_queue_config('q', 'max_retries', '2')`)
	e.exec(`SELECT pgque.subscribe('q', 'bad')`)
	e.exec(`SELECT pgque.subscribe('q', 'good')`)
	e.exec(`SELECT pgque.send('q', 'poison'::text)`)
	e.tick("q")
	exactlyOnce(t, e.drain("q", "good", 10), []string{"poison"})

	for attempt := 0; attempt <= 2; attempt++ {
		ms := e.receive("q", "bad", 10)
		if len(ms) != 1 || ms[0].Payload != "poison" {
			t.Fatalf("attempt %d: receive = %+v", attempt, ms)
		}
		if int(ms[0].Retry) != attempt {
			t.Fatalf("attempt %d: retry_count = %d", attempt, ms[0].Retry)
		}
		// A forged payload in the passed message is ignored: only msg_id counts.
		if n := e.int64(`SELECT pgque.nack($1, ROW($2, $1, 'x', 'forged', 0, now(), NULL, NULL, NULL, NULL)::pgque.message, '0 seconds', 'boom')`, ms[0].Batch, ms[0].ID); n != 1 {
			t.Fatalf("nack = %d", n)
		}
		e.exec(`SELECT pgque.ack($1)`, ms[0].Batch)
		e.exec(`SELECT pgque.maint_retry_events()`)
		e.tick("q")
		// The retry goes to "bad" only.
		if got := e.drain("q", "good", 10); len(got) != 0 {
			t.Fatalf("good consumer got the retry: %v", got)
		}
	}
	if got := e.receive("q", "bad", 10); len(got) != 0 {
		t.Fatalf("after max_retries, bad still receives %v", got)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.dlq_inspect('q') WHERE ev_data = 'poison' AND consumer_name = 'bad' AND dl_reason = 'boom'`); n != 1 {
		t.Fatalf("dead letters = %d, want 1", n)
	}
	dl := e.int64(`SELECT dl_id FROM pgque.dlq_inspect('q')`)
	e.exec(`SELECT pgque.dlq_replay($1)`, dl)
	if n := e.int64(`SELECT count(*) FROM pgque.dlq_inspect('q')`); n != 0 {
		t.Fatalf("dead letters after replay = %d", n)
	}
	e.tick("q")
	exactlyOnce(t, e.drain("q", "bad", 10), []string{"poison"})
	if got := e.drain("q", "good", 10); len(got) != 0 {
		t.Fatalf("replay reached the good consumer: %v", got)
	}
	if n := e.int64(`SELECT pgque.dlq_purge('q', '0 seconds')`); n != 0 {
		t.Fatalf("purge of an empty DLQ = %d", n)
	}
}

func TestRotationWaitsForLaggingConsumer(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_queue_config('q', 'rotation_period', '0')`)
	e.exec(`SELECT pgque.subscribe('q', 'fast')`)
	e.exec(`SELECT pgque.subscribe('q', 'slow')`)
	e.exec(`SELECT pgque.send('q', 'old'::text)`)
	e.tick("q")
	e.drain("q", "fast", 10)

	rotated := 0
	for i := 0; i < 6; i++ {
		rotated += int(e.int64(`SELECT pgque.maint_rotate_tables_step1('q')`))
		e.exec(`SELECT pgque.maint_rotate_tables_step2()`)
		e.exec(`SELECT pgque.send('q', $1::text)`, fmt.Sprint("new", i))
		e.tick("q")
		e.drain("q", "fast", 10)
	}
	// The table holding "old" must not have been truncated under "slow".
	got := e.drain("q", "slow", 100)
	if len(got) == 0 || got[0] != "old" {
		t.Fatalf("slow consumer lost events under rotation: %v (rotations: %d)", got, rotated)
	}
	if len(got) != 7 {
		t.Fatalf("slow consumer got %d events, want 7: %v", len(got), got)
	}
	// Caught up: rotation proceeds and, after a full cycle, old tables are empty.
	// (Transactions of other tests hold snapshot xmins back; rotation may have
	// to wait for them, so allow some rounds.)
	total := 0
	for deadline := time.Now().Add(20 * time.Second); total < 3 && time.Now().Before(deadline); {
		total += int(e.int64(`SELECT pgque.maint_rotate_tables_step1('q')`))
		e.exec(`SELECT pgque.maint_rotate_tables_step2()`)
		e.tick("q")
		e.drain("q", "fast", 10)
		e.drain("q", "slow", 10)
		time.Sleep(20 * time.Millisecond)
	}
	if total < 3 {
		t.Fatalf("rotation made %d switches after the consumer caught up, want >= 3", total)
	}
	var rows int64
	for n := 0; n < 3; n++ {
		rows += e.int64(fmt.Sprintf(`SELECT count(*) FROM pgque.event_1_%d`, n))
	}
	if rows != 0 {
		t.Fatalf("after a full rotation cycle the event tables still hold %d rows", rows)
	}
}

func TestSecurityDefinerAndGrants(t *testing.T) {
	e := setup(t)
	if n := e.int64(`
		SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname = 'pgque' AND p.prosecdef
		   AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pgque, pg_temp'], false)`); n != 0 {
		t.Fatalf("%d SECURITY DEFINER functions without a pinned search_path", n)
	}
	if n := e.int64(`SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname = 'pgque' AND has_function_privilege('public', p.oid, 'EXECUTE')`); n != 0 {
		t.Fatalf("%d pgque functions are executable by PUBLIC", n)
	}
	if n := e.int64(`SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname = 'pgque' AND p.prosecdef AND p.prokind = 'p'`); n != 0 {
		t.Fatalf("%d SECURITY DEFINER procedures (they could not COMMIT)", n)
	}

	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	suffix := strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	writer, reader := "w_"+suffix, "r_"+suffix
	e.exec(fmt.Sprintf(`CREATE ROLE %s LOGIN IN ROLE pgque_writer`, writer))
	e.exec(fmt.Sprintf(`CREATE ROLE %s LOGIN IN ROLE pgque_reader`, reader))
	t.Cleanup(func() {
		e.exec(`RESET ROLE`)
		e.exec(fmt.Sprintf(`DROP OWNED BY %s, %s`, writer, reader))
		e.exec(fmt.Sprintf(`DROP ROLE %s, %s`, writer, reader))
	})

	e.exec(`SET ROLE ` + writer)
	if id := e.int64(`SELECT pgque.send('q', 'hello'::text)`); id < 1 {
		t.Fatal("writer could not send")
	}
	if err := e.sqlErr(`SELECT * FROM pgque.receive('q', 'c', 10)`); err.Code != "42501" {
		t.Fatalf("writer receive: %s %s, want 42501", err.Code, err.Message)
	}
	if err := e.sqlErr(`SELECT * FROM pgque.event_1_0`); err.Code != "42501" {
		t.Fatalf("writer reading an event table: %s, want 42501", err.Code)
	}
	e.exec(`RESET ROLE`)
	e.tick("q")

	e.exec(`SET ROLE ` + reader)
	if err := e.sqlErr(`SELECT pgque.send('q', 'x'::text)`); err.Code != "42501" {
		t.Fatalf("reader send: %s %s, want 42501", err.Code, err.Message)
	}
	if err := e.sqlErr(`SELECT pgque.create_queue('other')`); err.Code != "42501" {
		t.Fatalf("reader create_queue: %s, want 42501", err.Code)
	}
	exactlyOnce(t, e.drain("q", "c", 10), []string{"hello"})
	e.exec(`RESET ROLE`)
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	e := setup(t)
	fingerprint := func() int64 {
		return e.int64(`SELECT (SELECT count(*) FROM pgque.queue) * 1000 + (SELECT count(*) FROM pgque.subscription) * 100 + (SELECT count(*) FROM pgque.consumer)`)
	}
	before := fingerprint()
	long := strings.Repeat("x", 58)
	if err := e.sqlErr(`SELECT pgque.create_queue($1)`, long); err.Code != "P0001" || !strings.Contains(err.Message, "57") {
		t.Fatalf("58-byte name: %s %s", err.Code, err.Message)
	}
	// 57 bytes of multibyte characters: 19 x 3 bytes is fine, 15 emoji (60 bytes) is not.
	if err := e.sqlErr(`SELECT pgque.create_queue($1)`, strings.Repeat("🚀", 15)); err.Code != "P0001" {
		t.Fatalf("60-byte emoji name: %s", err.Code)
	}
	for _, bad := range []string{"", "tab\there"} {
		if err := e.sqlErr(`SELECT pgque.create_queue($1)`, bad); err.Code != "22023" {
			t.Fatalf("name %q: %s %s", bad, err.Code, err.Message)
		}
	}
	if err := e.sqlErr(`SELECT pgque.create_queue(NULL)`); err.Code != "P0001" {
		t.Fatalf("NULL name: %s", err.Code)
	}
	if fingerprint() != before {
		t.Fatal("refused create_queue calls changed something")
	}

	// Quotes, spaces, emoji are data: they work end to end, LISTEN included.
	for i, name := range []string{`it's "quoted"`, "with space", "🚀 rocket", `x'); DROP TABLE pgque.queue; --`, strings.Repeat("y", 57)} {
		if n := e.int64(`SELECT pgque.create_queue($1)`, name); n != 1 {
			t.Fatalf("create %q = %d", name, n)
		}
		consumer := name + " consumer"
		e.exec(`SELECT pgque.subscribe($1, $2)`, name, consumer)
		e.exec(`SELECT pgque.send($1, $2::text)`, name, fmt.Sprint("p", i))
		e.tick(name)
		exactlyOnce(t, e.drain(name, consumer, 10), []string{fmt.Sprint("p", i)})
		if n := e.int64(`SELECT count(*) FROM pgque.get_queue_info($1)`, name); n != 1 {
			t.Fatalf("get_queue_info(%q) = %d rows", name, n)
		}
	}

	if err := e.sqlErr(`SELECT pgque.send_batch('q', NULL::text[])`); err.Code != "P0001" {
		t.Fatalf("NULL array on missing queue: %s %s", err.Code, err.Message)
	}
	e.exec(`SELECT pgque.create_queue('q')`)
	before = fingerprint()
	if err := e.sqlErr(`SELECT pgque.send_batch('q', NULL::text[])`); err.Code != "P0001" {
		t.Fatalf("NULL text[]: %s %s", err.Code, err.Message)
	}
	if err := e.sqlErr(`SELECT pgque.send_batch('q', NULL::jsonb[])`); err.Code != "P0001" {
		t.Fatalf("NULL jsonb[]: %s %s", err.Code, err.Message)
	}
	if n := e.int64(`SELECT cardinality(pgque.send_batch('q', '{}'::text[]))`); n != 0 {
		t.Fatalf("empty batch returned %d ids", n)
	}
	if err := e.sqlErr(`SELECT pgque.send('q', '{bad json'::jsonb)`); err.Code != "22P02" {
		t.Fatalf("bad json: %s", err.Code)
	}
	if err := e.sqlErr(`SELECT pgque.send('nope', 'x'::text)`); err.Code != "P0001" || !strings.Contains(err.Message, `"nope"`) {
		t.Fatalf("unknown queue: %s %s", err.Code, err.Message)
	}
	if err := e.sqlErr(`SELECT * FROM pgque.receive('q', 'nobody', 10)`); err.Code != "P0001" || !strings.Contains(err.Message, "nobody") {
		t.Fatalf("unknown consumer: %s %s", err.Code, err.Message)
	}
	if err := e.sqlErr(`SELECT * FROM pgque.receive('q', 'nobody', 0)`); err.Code != "P0001" {
		t.Fatalf("max_return 0: %s", err.Code)
	}
	if err := e.sqlErr(`SELECT pgque.set_queue_config('q', 'ticker_max_count', 'lots')`); err.Code != "P0001" {
		t.Fatalf("bad config value: %s %s", err.Code, err.Message)
	}
	if err := e.sqlErr(`SELECT pgque.set_queue_config('q', 'no_such_param', '1')`); err.Code != "P0001" {
		t.Fatalf("unknown param: %s %s", err.Code, err.Message)
	}
	if fingerprint() != before {
		t.Fatal("refused calls changed something")
	}

	// Acks of unknown, foreign (another consumer's, already finished) batches return 0.
	e.exec(`SELECT pgque.subscribe('q', 'a')`)
	e.exec(`SELECT pgque.send('q', 'm'::text)`)
	e.tick("q")
	ms := e.receive("q", "a", 10)
	if len(ms) != 1 {
		t.Fatalf("receive = %v", ms)
	}
	if n := e.int64(`SELECT pgque.ack(-42)`); n != 0 {
		t.Fatalf("ack of an unknown batch = %d", n)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, ms[0].Batch); n != 1 {
		t.Fatalf("ack = %d", n)
	}
	if n := e.int64(`SELECT pgque.ack($1)`, ms[0].Batch); n != 0 {
		t.Fatalf("second ack of a finished batch = %d", n)
	}
	if n := e.int64(`SELECT pgque.finish_batch($1)`, ms[0].Batch); n != 0 {
		t.Fatalf("finish of a finished batch = %d", n)
	}
}
