package hotlistpg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// reseedEnv is one database with queue q and helpers for the reseed tests.
type reseedEnv struct {
	t   *testing.T
	ctx context.Context
	c   *pgx.Conn
	dsn string
	ids map[string]int32
}

func newReseedEnv(t *testing.T) *reseedEnv {
	t.Helper()
	return newReseedEnvOn(t, pgtest.NewDB(t))
}

// newReseedEnvOn is newReseedEnv on a database with the engine installed.
func newReseedEnvOn(t *testing.T, dsn string) *reseedEnv {
	t.Helper()
	e := &reseedEnv{t: t, ctx: ctxT(t), c: pgtest.Conn(t, dsn), dsn: dsn, ids: map[string]int32{}}
	if _, err := broker.Configure(e.ctx, e.c, "q", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *reseedEnv) tick() {
	e.t.Helper()
	if _, err := e.c.Exec(e.ctx, `WITH f AS MATERIALIZED (SELECT pgque.force_next_tick('q') AS t) SELECT pgque.ticker('q') FROM f`); err != nil {
		e.t.Fatal(err)
	}
}

// push pushes one message to each partition and ticks.
func (e *reseedEnv) push(parts ...string) {
	e.t.Helper()
	items := make([]broker.Item, len(parts))
	for i, p := range parts {
		items[i] = broker.Item{Queue: "q", Partition: p, Payload: json.RawMessage(`1`)}
	}
	res, err := broker.Push(e.ctx, e.c, items)
	if err != nil {
		e.t.Fatal(err)
	}
	for i, r := range res {
		e.ids[parts[i]] = r.PartitionID
	}
	e.tick()
}

// pop pops (group g) everything from the named partitions, with auto-ack
// or leaving a lease, and returns the messages taken.
func (e *reseedEnv) pop(autoAck bool, parts ...string) int {
	e.t.Helper()
	ids := make([]int32, len(parts))
	for i, p := range parts {
		ids[i] = e.ids[p]
	}
	res, err := broker.PopList(e.ctx, e.c, broker.Pop{Queue: "q", Group: "g", Batch: 100000, MaxPartitions: len(parts) + 1,
		AutoAck: autoAck, SubscriptionMode: "all"}, ids)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(res.Messages)
}

// reseed returns the names group_reseed lists for g (all pages of size
// page), sorted, and the partitions listed with a lease.
func (e *reseedEnv) reseed(page int) (names []string, leased []string) {
	e.t.Helper()
	after := int32(-1)
	for {
		rows, err := broker.Reseed(e.ctx, e.c, "q", "g", after, page)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range rows {
			names = append(names, r.Partition)
			if !r.LeaseUntil.IsZero() {
				leased = append(leased, r.Partition)
			}
			after = r.PartitionID
		}
		if len(rows) < page {
			break
		}
	}
	sort.Strings(names)
	sort.Strings(leased)
	return names, leased
}

func parts(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

// A partition whose only pending event is old — pushed long before, its
// cursor far behind every other cursor of the group, which moved on over
// many ticks and a later idle advance — is listed; so is one the group
// drained and that got one event much later. Nothing else is.
func TestReseedListsOldPendingBehindAdvancedCursors(t *testing.T) {
	t.Parallel()
	e := newReseedEnv(t)
	busy := parts("b", 20)
	e.push(append([]string{"old", "late"}, busy...)...)
	if n := e.pop(true, append([]string{"late"}, busy...)...); n != 21 {
		t.Fatalf("first pop took %d, want 21", n)
	}
	// "old" keeps its event; the others move on for many ticks.
	for round := range 30 {
		e.push(busy...)
		if n := e.pop(true, busy...); n != len(busy) {
			t.Fatalf("round %d took %d, want %d", round, n, len(busy))
		}
	}
	if _, err := e.c.Exec(e.ctx, `SELECT pgque.group_advance_idle(queue_id) FROM pgque.queue WHERE queue_name = 'q'`); err != nil {
		t.Fatal(err)
	}
	e.push("late")
	for range 5 {
		e.push(busy...)
		e.pop(true, busy...)
	}
	got, leased := e.reseed(10000)
	if strings.Join(got, ",") != "late,old" || len(leased) != 0 {
		t.Fatalf("reseed listed %v (leased %v), want [late old] without leases", got, leased)
	}
	// The same with pages of one partition.
	if got, _ := e.reseed(1); strings.Join(got, ",") != "late,old" {
		t.Fatalf("reseed with pages of 1 listed %v, want [late old]", got)
	}
}

// A partition created after the group's cursors were all seeded and
// advanced (so no cursor of the group covers it, and the subscription
// snapshot moved to the latest tick) is listed once it has an event; a
// leased partition is listed with its lease even with nothing else
// pending; a drained one is not.
func TestReseedListsNewPartitionAndLeased(t *testing.T) {
	t.Parallel()
	e := newReseedEnv(t)
	base := parts("p", 10)
	e.push(base...)
	if n := e.pop(true, base...); n != 10 {
		t.Fatalf("took %d, want 10", n)
	}
	for range 3 {
		e.push(base...)
		e.pop(true, base...)
	}
	if _, err := e.c.Exec(e.ctx, `SELECT pgque.group_advance_idle(queue_id) FROM pgque.queue WHERE queue_name = 'q'`); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.reseed(100); len(got) != 0 {
		t.Fatalf("drained: reseed listed %v, want nothing", got)
	}
	e.push("new", "p00003")
	var cursors int
	if err := e.c.QueryRow(e.ctx, `SELECT count(*) FROM pgque.group_cursor gc JOIN pgque.broker_group g ON g.grp_id = gc.gc_group
		WHERE g.grp_name = 'g' AND gc.gc_partition = $1`, e.ids["new"]).Scan(&cursors); err != nil {
		t.Fatal(err)
	}
	if cursors != 0 {
		t.Fatalf("cursors of g on the new partition: %d, want 0", cursors)
	}
	if n := e.pop(false, "p00003"); n != 1 {
		t.Fatalf("leased pop took %d, want 1", n)
	}
	got, leased := e.reseed(100)
	if strings.Join(got, ",") != "new,p00003" || strings.Join(leased, ",") != "p00003" {
		t.Fatalf("reseed listed %v (leased %v), want [new p00003] with p00003 leased", got, leased)
	}
	// pop_any's scan (leased left out) still finds the new partition.
	var pending []int32
	rows, err := e.c.Query(e.ctx, `SELECT g.partition_id FROM pgque.queue q, pgque.broker_group b,
		pgque.group_pending(q.queue_id, b.grp_id, NULL, NULL, false) g WHERE q.queue_name = 'q' AND b.grp_name = 'g'`)
	if err != nil {
		t.Fatal(err)
	}
	if pending, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0] != e.ids["new"] {
		t.Fatalf("group_pending without leased: %v, want [%d]", pending, e.ids["new"])
	}
}

// The reseed's work grows with the partitions that can have work, not
// with all of them: with 2,000 partitions, each with one event the group
// popped, and 10 hot ones, the exact probe (index scans of the event
// tables' (ev_partition, ev_txid, ev_id) index) runs on the hot ones only.
// The old scan probed every partition (thousands of index scans).
func TestReseedWorkBoundedByHotPartitions(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) { t.Parallel(); reseedWorkBounded(t, false) })
	// A transaction (with an xid) held open from before the pushes: every
	// tick's snapshot keeps its xmin, so a candidate test loosened to xmin
	// bounds listed every partition with an event since (15,972 scans).
	t.Run("held xmin", func(t *testing.T) { t.Parallel(); reseedWorkBounded(t, true) })
}

func reseedWorkBounded(t *testing.T, holdXmin bool) {
	e := newReseedEnv(t)
	if holdXmin {
		holder := pgtest.Conn(t, e.dsn)
		htx, err := holder.BeginTx(e.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = htx.Rollback(context.Background()) }()
		// with a transaction id: it stays in every later snapshot's xip
		if _, err := htx.Exec(e.ctx, `SELECT pg_current_xact_id()`); err != nil {
			t.Fatal(err)
		}
	}
	all := parts("p", 2000)
	e.push(all...)
	if n := e.pop(true, all...); n != len(all) {
		t.Fatalf("seed pop took %d, want %d", n, len(all))
	}
	hot := make([]string, 10)
	for i := range hot {
		hot[i] = all[i*200+7]
	}
	e.push(hot...)
	tx, err := e.c.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(e.ctx) }()
	// A delta inside the transaction: PostgreSQL 15's pg_stat_xact_* also
	// show the session's earlier transactions' counts (the seed pops) until
	// they are flushed, which happens at an unpredictable moment.
	idxScans := func() int64 {
		var n int64
		if err := tx.QueryRow(e.ctx, `SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_xact_user_tables
			WHERE schemaname = 'pgque' AND relname ~ '^event_[0-9]+_[0-9]+$'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	base := idxScans()
	rows, err := broker.Reseed(e.ctx, tx, "q", "g", -1, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(hot) {
		t.Fatalf("reseed listed %d partitions, want %d", len(rows), len(hot))
	}
	scans := idxScans() - base
	// per hot partition: two tables x (range + in-progress probes) x two
	// ranges, plus the candidate scan: far below one per partition.
	if scans > 200 {
		t.Fatalf("reseed ran %d index scans on the event tables for %d hot of %d partitions, want <= 200", scans, len(hot), len(all))
	}
}

// An event whose transaction was in progress across the ticks that moved
// the cursor past later events of its partition (a held push) is listed
// once it commits: it is below the cursor's position but not visible in
// its gc_hi.
func TestReseedListsEventCommittedAcrossTicks(t *testing.T) {
	t.Parallel()
	e := newReseedEnv(t)
	e.push("a", "b")
	if n := e.pop(true, "a", "b"); n != 2 {
		t.Fatalf("took %d, want 2", n)
	}
	other := pgtest.Conn(t, e.dsn)
	tx, err := other.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(e.ctx) }()
	if _, err := broker.Push(e.ctx, tx, []broker.Item{{Queue: "q", Partition: "a", Payload: json.RawMessage(`"held"`)}}); err != nil {
		t.Fatal(err)
	}
	e.tick()
	e.push("a")
	if n := e.pop(true, "a"); n != 1 {
		t.Fatalf("took %d beside the held push, want 1", n)
	}
	e.push("b")
	if n := e.pop(true, "b"); n != 1 {
		t.Fatalf("took %d from b, want 1", n)
	}
	if got, _ := e.reseed(100); len(got) != 0 {
		t.Fatalf("before the held push commits: reseed listed %v, want nothing", got)
	}
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.tick()
	if got, _ := e.reseed(100); strings.Join(got, ",") != "a" {
		t.Fatalf("after the held push committed: reseed listed %v, want [a]", got)
	}
	if n := e.pop(true, "a"); n != 1 {
		t.Fatalf("the held push: took %d, want 1", n)
	}
}

// After event-table switches, a pending event left in the previous table
// (the group pins the rotation there) is listed beside one in the current
// table.
// On a private cluster: a switch's step 2 waits for every older
// transaction of the cluster, and other tests hold some open for minutes
// (a held xmin is what they test).
func TestReseedListsPendingInPreviousTable(t *testing.T) {
	t.Parallel()
	e := newReseedEnvOn(t, pgtest.PrivateEngineDB(t, "reseedprev"))
	// g subscribes first ("new"), so its pin starts after the queue's
	// first switch point: one switch, then "old" pins the next.
	e.tick()
	if _, err := broker.PopList(e.ctx, e.c, broker.Pop{Queue: "q", Group: "g", Batch: 1, SubscriptionMode: "new"}, []int32{}); err != nil {
		t.Fatal(err)
	}
	e.tick()
	e.push("old", "b")
	if n := e.pop(true, "b"); n != 1 {
		t.Fatalf("took %d, want 1", n)
	}
	if _, err := e.c.Exec(e.ctx, `SELECT pgque.set_queue_config('q', 'rotation_period', '0')`); err != nil {
		t.Fatal(err)
	}
	table := func() (n int) {
		if err := e.c.QueryRow(e.ctx, `SELECT queue_cur_table FROM pgque.queue WHERE queue_name = 'q'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// (step 2 waits for every older transaction of the cluster: retry the
	// first switch, then try four more rounds)
	first, switches, extra := table(), 0, 0
	for round := 0; round < 300 && extra < 4; round++ {
		if switches > 0 {
			extra++
		} else if round > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		before := table()
		for _, q := range []string{`SELECT pgque.maint_rotate_tables_step2()`, `SELECT pgque.maint_rotate_tables_step1('q')`} {
			if _, err := e.c.Exec(e.ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if table() != before {
			switches++
		}
		e.push("b")
		e.pop(true, "b")
	}
	if switches != 1 || table() == first {
		t.Fatalf("event tables switched %d times (current %d, first %d), want once: the pending event pins the rest", switches, table(), first)
	}
	e.push("late")
	if got, _ := e.reseed(100); strings.Join(got, ",") != "late,old" {
		t.Fatalf("reseed listed %v, want [late old]", got)
	}
}
