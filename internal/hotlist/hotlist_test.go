package hotlist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// fakeReseeder serves fixed rows per (key, group) and counts calls.
type fakeReseeder struct {
	mu    sync.Mutex
	rows  map[string][]ReseedRow
	calls int
	err   error
}

func (f *fakeReseeder) ReseedPage(_ context.Context, key, group string, after int32, limit int) ([]ReseedRow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	var out []ReseedRow
	for _, r := range f.rows[key+"|"+group] {
		if r.ID > after && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

type env struct {
	h     *HotList
	clock *fakeClock
	rs    *fakeReseeder
	key   string
}

func setup(t *testing.T, o Options) *env {
	t.Helper()
	t.Parallel()
	c := newFakeClock()
	rs := &fakeReseeder{rows: map[string][]ReseedRow{}}
	o.Clock, o.Logger = c, cmpLogger(o.Logger)
	if o.Reseeder == nil {
		o.Reseeder = rs
	}
	o.Rand = func(n int64) int64 { return n / 2 }
	return &env{h: New(o), clock: c, rs: rs, key: queuekey.Make("t", "q")}
}

func cmpLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return quietLogger()
	}
	return l
}

func (e *env) mark(names ...string) {
	for _, n := range names {
		e.h.Mark(e.key, PartRef{ID: NoID, Name: n}, SourcePush)
	}
}

// out checks out for group g (batch 1000, partitions 64) and returns the
// checkout and candidate names.
func (e *env) out(t *testing.T, g string) (Checkout, []string) {
	t.Helper()
	co, err := e.h.Checkout(ctxT(t), Request{Key: e.key, Group: g, Batch: 1000, Partitions: 64})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range co.Candidates() {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return co, names
}

// listed checks out and releases: which partitions the ring lists now.
func (e *env) listed(t *testing.T, g string) []string {
	t.Helper()
	co, names := e.out(t, g)
	co.Release()
	return names
}

func verdict(name, kind string, drained bool, until time.Time) Verdict {
	return Verdict{PartitionID: NoID, Partition: name, Kind: kind, Drained: drained, Until: until}
}

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func TestEmptyRacingMarkNeverClears(t *testing.T) {
	e := setup(t, Options{EmptyGrace: -1})
	e.listed(t, "g") // create the ring
	e.mark("a", "b")
	co, names := e.out(t, "g")
	eq(t, "checked out", names, []string{"a", "b"})
	e.mark("a") // a push lands after the pop-list looked, before check-in
	co.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{}), verdict("b", VerdictEmpty, false, time.Time{})})
	eq(t, "after check-in", e.listed(t, "g"), []string{"a"})
	st := e.h.Stats()
	if st.Empty != 2 || st.Ready != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestEmptyRecentMarkRevisits(t *testing.T) {
	e := setup(t, Options{}) // EmptyGrace 2 s
	e.listed(t, "g")
	e.mark("a")
	co, _ := e.out(t, "g")
	co.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{})})
	eq(t, "just after", e.listed(t, "g"), nil)
	e.clock.Advance(50 * time.Millisecond) // first revisit at RevisitMin
	co, names := e.out(t, "g")
	eq(t, "after 50 ms", names, []string{"a"})
	co.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{})})
	e.clock.Advance(99 * time.Millisecond) // doubled: 100 ms
	eq(t, "after 99 ms", e.listed(t, "g"), nil)
	e.clock.Advance(2 * time.Second)
	co, names = e.out(t, "g")
	eq(t, "later", names, []string{"a"})
	co.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{})}) // grace over: cleared
	e.clock.Advance(5 * time.Second)
	eq(t, "cleared", e.listed(t, "g"), nil)
}

func TestTookParksUntilOwnAck(t *testing.T) {
	e := setup(t, Options{EmptyGrace: -1})
	e.listed(t, "g")
	e.mark("a", "b")
	wake, cancel := e.h.Subscribe(e.key)
	defer cancel()
	co, _ := e.out(t, "g")
	lease := e.clock.Now().Add(time.Minute)
	co.CheckIn([]Verdict{verdict("a", VerdictTook, true, lease), verdict("b", VerdictTook, false, lease)})
	eq(t, "parked", e.listed(t, "g"), nil)
	if st := e.h.Stats(); st.Wheel != 2 {
		t.Fatalf("wheel %d", st.Wheel)
	}
	// a was drained: its ack clears it; b was not: its ack promotes and wakes.
	e.h.Acked(e.key, "g", PartRef{ID: NoID, Name: "a"}, AckOutcome{LeaseReleased: true})
	select {
	case <-wake:
		t.Fatal("a drained ack woke")
	default:
	}
	e.h.Acked(e.key, "g", PartRef{ID: NoID, Name: "b"}, AckOutcome{LeaseReleased: true})
	select {
	case <-wake:
	default:
		t.Fatal("promote did not wake")
	}
	eq(t, "after acks", e.listed(t, "g"), []string{"b"})
	// A partial ack (lease kept) changes nothing; ParkMax bounds the park.
	co, _ = e.out(t, "g")
	co.CheckIn([]Verdict{verdict("b", VerdictTook, true, lease)})
	e.h.Acked(e.key, "g", PartRef{ID: NoID, Name: "b"}, AckOutcome{})
	e.clock.Advance(999 * time.Millisecond)
	eq(t, "parked 999 ms", e.listed(t, "g"), nil)
	e.clock.Advance(time.Millisecond)
	eq(t, "parked 1000 ms", e.listed(t, "g"), []string{"b"})
}

func TestMarkWhileParkedForOwnLeaseIsNotDrained(t *testing.T) {
	e := setup(t, Options{EmptyGrace: -1})
	e.listed(t, "g")
	e.mark("a")
	co, _ := e.out(t, "g")
	co.CheckIn([]Verdict{verdict("a", VerdictTook, true, e.clock.Now().Add(time.Minute))})
	e.mark("a") // a push while our consumer holds the lease
	eq(t, "still parked", e.listed(t, "g"), nil)
	e.h.Acked(e.key, "g", PartRef{ID: NoID, Name: "a"}, AckOutcome{LeaseReleased: true})
	eq(t, "promoted", e.listed(t, "g"), []string{"a"})
}

func TestLeasedRevisitsAfterUntilPlusSlack(t *testing.T) {
	e := setup(t, Options{})
	e.listed(t, "g")
	e.mark("a")
	co, _ := e.out(t, "g")
	co.CheckIn([]Verdict{verdict("a", VerdictLeased, false, e.clock.Now().Add(5*time.Second))})
	e.clock.Advance(5299 * time.Millisecond)
	eq(t, "at until+299ms", e.listed(t, "g"), nil)
	e.clock.Advance(time.Millisecond)
	eq(t, "at until+300ms", e.listed(t, "g"), []string{"a"})
}

func TestDelayedProcessingParksMarks(t *testing.T) {
	e := setup(t, Options{})
	e.h.SetQueueOptions(e.key, QueueOptions{Delay: 2 * time.Second})
	e.listed(t, "g")
	e.mark("a")
	e.clock.Advance(2299 * time.Millisecond)
	eq(t, "before D+300ms", e.listed(t, "g"), nil)
	e.clock.Advance(time.Millisecond)
	eq(t, "at D+300ms", e.listed(t, "g"), []string{"a"})
}

func TestWindowBufferHoldsUntilElapsedOr100Marks(t *testing.T) {
	e := setup(t, Options{})
	e.h.SetQueueOptions(e.key, QueueOptions{Window: time.Second})
	e.listed(t, "g")
	for i := 0; i < 99; i++ {
		e.mark("a")
	}
	e.mark("b")
	eq(t, "99 marks", e.listed(t, "g"), nil)
	e.mark("a")
	eq(t, "100 marks", e.listed(t, "g"), []string{"a"})
	e.clock.Advance(time.Second)
	co, names := e.out(t, "g")
	eq(t, "window elapsed", names, []string{"a", "b"})
	// took with auto-ack on a window queue re-arms the window
	co.CheckIn([]Verdict{verdict("a", VerdictTook, false, time.Time{}), verdict("b", VerdictTook, false, time.Time{})})
	eq(t, "re-armed", e.listed(t, "g"), nil)
	e.clock.Advance(time.Second)
	eq(t, "after the window", e.listed(t, "g"), []string{"a", "b"})
}

func TestDropGuard(t *testing.T) {
	e := setup(t, Options{})
	e.listed(t, "g")
	e.mark("a", "b", "c")
	func() {
		defer func() { _ = recover() }()
		co, _ := e.out(t, "g")
		defer co.Release()
		panic("handler died")
	}()
	co, names := e.out(t, "g")
	eq(t, "after panic", names, []string{"a", "b", "c"})
	co.CheckIn([]Verdict{verdict("a", VerdictTook, false, e.clock.Now().Add(time.Minute))}) // b, c: no verdict
	co.Release()
	co.Release()
	eq(t, "after check-in and release", e.listed(t, "g"), []string{"b", "c"})
	if st := e.h.Stats(); st.NoVerdict != 2 || st.Released != 3+2 || st.Inflight != 0 {
		t.Fatalf("stats %+v", st) // 3 by the panic, 2 by listed()
	}
}

func TestStrandedInflightReclaimedByReseed(t *testing.T) {
	e := setup(t, Options{})
	e.listed(t, "g")
	e.mark("a")
	lostCo, names := e.out(t, "g") // never checked in nor released
	eq(t, "out", names, []string{"a"})
	e.clock.Advance(29 * time.Second)
	e.h.ReseedDue(ctxT(t)) // phase 7.5 s: runs, but a is not stranded yet
	eq(t, "not yet", e.listed(t, "g"), nil)
	e.clock.Advance(30 * time.Second)
	if n := e.h.ReseedDue(ctxT(t)); n != 1 {
		t.Fatalf("reseeds %d", n)
	}
	eq(t, "reclaimed", e.listed(t, "g"), []string{"a"})
	lostCo.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{})}) // late: ignored
	eq(t, "late check-in ignored", e.listed(t, "g"), []string{"a"})
	if st := e.h.Stats(); st.Reclaimed != 1 {
		t.Fatalf("reclaimed %d", st.Reclaimed)
	}
}

func TestReseedKeysetPagesCapAndPhase(t *testing.T) {
	e := setup(t, Options{ReseedPageSize: 10, ReseedMaxPages: 2})
	var rows []ReseedRow
	for i := 0; i < 25; i++ {
		rows = append(rows, ReseedRow{ID: int32(100 + i), UUID: fmt.Sprintf("u%d", i), Name: fmt.Sprintf("p%02d", i)})
	}
	rows[0].LeasedUntil = e.clock.Now().Add(10 * time.Second)
	e.rs.rows[e.key+"|g"] = rows
	_, names := e.out(t, "g") // cold: reseeds on the pop path
	if e.rs.calls != 2 || len(names) != 19 || names[0] != "p01" || names[18] != "p19" {
		t.Fatalf("calls %d, listed %v", e.rs.calls, names)
	}
	// The cold reseed counts as the first: the next comes one interval
	// later less the ring's fixed phase (Rand → 7.5 s): at 22.5 s.
	e.clock.Advance(22499 * time.Millisecond)
	if n := e.h.ReseedDue(ctxT(t)); n != 0 {
		t.Fatalf("reseed before interval - phase")
	}
	e.clock.Advance(time.Millisecond)
	if n := e.h.ReseedDue(ctxT(t)); n != 1 {
		t.Fatalf("reseed at interval - phase: %d", n)
	}
	e.clock.Advance(30*time.Second - time.Millisecond)
	if n := e.h.ReseedDue(ctxT(t)); n != 0 {
		t.Fatalf("reseed before the interval")
	}
	e.clock.Advance(time.Millisecond)
	if n := e.h.ReseedDue(ctxT(t)); n != 1 {
		t.Fatalf("reseed at the interval: %d", n)
	}
	// Reseed rows taught ids and UUIDs: an ack by UUID finds the entry.
	q := e.h.lookup(e.key)
	q.mu.RLock()
	idx, ok, _ := q.resolve(PartRef{ID: NoID, UUID: "u3"})
	id := q.parts[idx].id
	q.mu.RUnlock()
	if !ok || id != 103 {
		t.Fatalf("learned %v %d", ok, id)
	}
}

func TestColdReseedErrorKeepsRingCold(t *testing.T) {
	e := setup(t, Options{})
	e.rs.err = errors.New("db down")
	if _, err := e.h.Checkout(ctxT(t), Request{Key: e.key, Group: "g", Batch: 1}); err == nil {
		t.Fatal("no error")
	}
	e.rs.err = nil
	e.rs.rows[e.key+"|g"] = []ReseedRow{{ID: 1, Name: "a"}}
	eq(t, "retried", e.listed(t, "g"), []string{"a"})
	if st := e.h.Stats(); st.ReseedErrors != 1 || st.Reseeds != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMarksReachEveryRingAndTenantScopedGroupDelete(t *testing.T) {
	e := setup(t, Options{})
	other := queuekey.Make("u", "q")
	for _, g := range []string{"g1", "g2"} {
		e.listed(t, g)
		if _, err := e.h.Checkout(ctxT(t), Request{Key: other, Group: g, Batch: 1}); err != nil {
			t.Fatal(err)
		}
	}
	e.mark("a")
	eq(t, "g1", e.listed(t, "g1"), []string{"a"})
	eq(t, "g2", e.listed(t, "g2"), []string{"a"})
	if n := e.h.GroupDeleted("t", "g1"); n != 1 {
		t.Fatalf("dropped %d rings, want 1 (tenant u keeps its g1)", n)
	}
	if st := e.h.Stats(); st.Rings != 3 {
		t.Fatalf("rings %d", st.Rings)
	}
	// The recreated ring is cold: it reseeds from the database.
	e.rs.rows[e.key+"|g1"] = []ReseedRow{{ID: 9, Name: "z"}}
	eq(t, "g1 after delete", e.listed(t, "g1"), []string{"z"})
}

func TestCheckoutWidth(t *testing.T) {
	for _, tc := range []struct {
		w                Width
		batch, parts, k  int
		marksEach, wantN int
	}{
		{WidthNarrow, 10, 1, 2, 5, 2}, // k = 2
		{WidthNarrow, 3, 4, 8, 1, 3},  // early stop at 3 marks
		{WidthNarrow, 100, 40, 64, 1, 64},
		{WidthWide, 1, 1, 16, 5, 16}, // no early stop
		{WidthWide, 1, 40, 256, 1, 256},
	} {
		t.Run(fmt.Sprintf("%d-%d-%d", tc.w, tc.batch, tc.parts), func(t *testing.T) {
			e := setup(t, Options{Width: tc.w})
			e.listed(t, "g")
			for i := 0; i < 300; i++ {
				for j := 0; j < tc.marksEach; j++ {
					e.mark(fmt.Sprintf("p%03d", i))
				}
			}
			co, err := e.h.Checkout(ctxT(t), Request{Key: e.key, Group: "g", Batch: tc.batch, Partitions: tc.parts})
			if err != nil {
				t.Fatal(err)
			}
			defer co.Release()
			if n := len(co.Candidates()); n != tc.wantN {
				t.Fatalf("%d candidates, want %d", n, tc.wantN)
			}
		})
	}
}

func TestWakeTickCoalescesQuietMarks(t *testing.T) {
	e := setup(t, Options{})
	wake, cancel := e.h.Subscribe(e.key)
	defer cancel()
	e.mark("a", "b", "a") // no ring: still wakes the gate
	select {
	case <-wake:
		t.Fatal("a quiet mark woke before the tick")
	default:
	}
	if n := e.h.WakeTick(); n != 1 {
		t.Fatalf("tick woke %d keys", n)
	}
	<-wake
	if n := e.h.WakeTick(); n != 0 {
		t.Fatalf("second tick woke %d", n)
	}
	e.h.Mark(e.key, PartRef{ID: NoID, Name: "a"}, SourceCommit)
	select {
	case <-wake:
	default:
		t.Fatal("commit did not wake now")
	}
	// A due wheel entry wakes a waited-on key at the tick.
	e.listed(t, "g")
	e.mark("c")
	co, _ := e.out(t, "g")
	co.CheckIn([]Verdict{verdict("c", VerdictLeased, false, e.clock.Now().Add(time.Second))})
	e.h.WakeTick()
	<-wake
	if n := e.h.WakeTick(); n != 0 {
		t.Fatalf("woke %d before due", n)
	}
	e.clock.Advance(1300 * time.Millisecond)
	if n := e.h.WakeTick(); n != 1 {
		t.Fatalf("due entry woke %d", n)
	}
	cancel()
	e.mark("d")
	if n := e.h.WakeTick(); n != 0 {
		t.Fatalf("woke %d with nobody waiting", n)
	}
}

type fakePeers struct {
	mu    sync.Mutex
	peers bool
	sent  []Hint
}

func (f *fakePeers) HasPeers() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.peers }
func (f *fakePeers) SendHints(_ context.Context, h []Hint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, h...)
	return nil
}

func TestPeerHints(t *testing.T) {
	p := &fakePeers{}
	e := setup(t, Options{Peers: p, HintSetMax: 3, HintBatch: 2})
	e.mark("a")
	if st := e.h.Stats(); st.HintsPending != 0 {
		t.Fatalf("hints collected with no peer listening")
	}
	p.peers = true
	e.mark("a", "b", "a", "c", "d")
	e.h.Mark(e.key, PartRef{ID: NoID, Name: "e"}, SourceReseed) // reseed rows are not hinted
	st := e.h.Stats()
	if st.HintsPending != 3 || st.HintsCoalesced != 1 || st.HintsDropped != 1 {
		t.Fatalf("stats %+v", st)
	}
	if n := e.h.FlushHints(ctxT(t)); n != 3 || len(p.sent) != 3 {
		t.Fatalf("sent %d %v", n, p.sent)
	}
	// Received hints mark and wake, and are never sent on.
	e.listed(t, "g")
	wake, cancel := e.h.Subscribe(e.key)
	defer cancel()
	e.h.ReceiveHints([]Hint{{Key: e.key, Partition: "x", ID: NoID}})
	e.h.WakeTick()
	<-wake
	eq(t, "peer mark", e.listed(t, "g"), []string{"x"})
	if st := e.h.Stats(); st.HintsPending != 0 || st.MarksRemote != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSweepDropsIdleQueues: pops and marks on 100,000 random queue names
// leave the ring count back at zero after two sweeps; a ring with pending
// work or a checkout in progress stays.
func TestSweepDropsIdleQueues(t *testing.T) {
	e := setup(t, Options{EmptyGrace: -1})
	const n = 100000
	for i := 0; i < n; i++ {
		key := queuekey.Make("t", fmt.Sprintf("rand-%x", uint32(i)*2654435761))
		e.h.Mark(key, PartRef{ID: NoID, Name: "p"}, SourcePush)
		co, err := e.h.Checkout(ctxT(t), Request{Key: key, Group: "g", Batch: 10})
		if err != nil {
			t.Fatal(err)
		}
		co.CheckIn(nil)
	}
	e.listed(t, "g")
	e.mark("busy")
	held, _ := e.out(t, "other")
	if st := e.h.Stats(); st.Rings != n+2 {
		t.Fatalf("rings %d", st.Rings)
	}
	if d := e.h.Sweep(); d != 0 {
		t.Fatalf("first sweep dropped %d (second chance)", d)
	}
	if d := e.h.Sweep(); d != n {
		t.Fatalf("second sweep dropped %d, want %d", d, n)
	}
	if st := e.h.Stats(); st.Rings != 2 || st.Queues != 1 {
		t.Fatalf("after sweeps %+v", st)
	}
	held.Release()
	e.h.Sweep()
	e.h.Sweep()
	if st := e.h.Stats(); st.Rings != 2 {
		t.Fatalf("queue with a ready entry swept: %+v", st)
	}
}

func TestTraceAndSummaryLog(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	l := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, nil))
	e := setup(t, Options{Logger: l, TracePrefix: "q"})
	e.listed(t, "g")
	e.mark("a")
	e.h.Mark(queuekey.Make("t", "other"), PartRef{ID: NoID, Name: "b"}, SourcePush)
	e.h.LogStats(Stats{})
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{`msg="hotlist trace: mark" key=t/q partition=a`, `msg="hotlist trace: checkout"`, `msg=hot-list queues=1 rings=1 ready=1`, `top="[t/q[g] ready=1 wheel=0 inflight=0]"`} {
		if !bytes.Contains([]byte(out), []byte(want)) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if bytes.Contains([]byte(out), []byte("t/other")) {
		t.Errorf("traced a queue outside the prefix:\n%s", out)
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	h := New(Options{Logger: quietLogger(), WakeTick: time.Millisecond, SweepInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	h.Start(ctx)
	h.Start(ctx)
	key := queuekey.Make("t", "q")
	wake, unsub := h.Subscribe(key)
	defer unsub()
	h.Mark(key, PartRef{ID: NoID, Name: "a"}, SourcePush)
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the wake loop did not wake")
	}
	co, err := h.Checkout(ctx, Request{Key: key, Group: "g", Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	co.CheckIn(nil)
	deadline := time.Now().Add(10 * time.Second)
	for h.Stats().Rings != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sweep loop did not drop the idle ring")
		}
		time.Sleep(5 * time.Millisecond)
	}
	sctx, scancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer scancel()
	if err := h.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Stop(sctx); err != nil {
		t.Fatal(err)
	}
}

func TestQueueDeletedForgetsInterning(t *testing.T) {
	e := setup(t, Options{})
	e.rs.rows[e.key+"|g"] = []ReseedRow{{ID: 0, UUID: "u0", Name: "a"}}
	eq(t, "seeded", e.listed(t, "g"), []string{"a"})
	e.h.QueueDeleted(e.key)
	if st := e.h.Stats(); st.Queues != 0 || st.Rings != 0 {
		t.Fatalf("after delete %+v", st)
	}
	// Re-created: ids start over; the old id 0 must not resolve to "a".
	e.rs.rows[e.key+"|g"] = []ReseedRow{{ID: 0, UUID: "u9", Name: "b"}}
	eq(t, "re-created", e.listed(t, "g"), []string{"b"})
	q := e.h.lookup(e.key)
	q.mu.RLock()
	idx, ok, _ := q.resolve(ByID(0, ""))
	name := q.parts[idx].name
	q.mu.RUnlock()
	if !ok || name != "b" {
		t.Fatalf("id 0 resolves to %q", name)
	}
}

type failingPeers struct{}

func (failingPeers) HasPeers() bool                          { return true }
func (failingPeers) SendHints(context.Context, []Hint) error { return errors.New("notify failed") }

func TestPeerSendFailureDropsAndCounts(t *testing.T) {
	e := setup(t, Options{Peers: failingPeers{}, HintBatch: 10})
	e.mark("a", "b", "c")
	if n := e.h.FlushHints(ctxT(t)); n != 0 {
		t.Fatalf("sent %d", n)
	}
	if st := e.h.Stats(); st.HintsDropped != 3 || st.HintsPending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestInvalidateReseedsEveryGroup(t *testing.T) {
	e := setup(t, Options{})
	e.listed(t, "g1")
	e.listed(t, "g2")
	e.rs.rows[e.key+"|g1"] = []ReseedRow{{ID: 3, Name: "c"}}
	e.rs.rows[e.key+"|g2"] = []ReseedRow{{ID: 4, Name: "d"}}
	if n := e.h.Invalidate(e.key); n != 2 {
		t.Fatalf("dropped %d", n)
	}
	eq(t, "g1", e.listed(t, "g1"), []string{"c"})
	eq(t, "g2", e.listed(t, "g2"), []string{"d"})
}

// A mark restarts the empty-verdict backoff: an entry that backed off to
// RevisitMax while its partition was quiet, then was marked while checked
// out (the pop-list looked before the push's tick), must be revisited
// after RevisitMin, not after the old backoff (found wiring the broker: a
// parked pop waited 1 s for a message pushed after a quiet spell).
func TestMarkRestartsEmptyBackoff(t *testing.T) {
	e := setup(t, Options{EmptyGrace: 10 * time.Second}) // revisits 50 ms … 1 s
	e.listed(t, "g")
	e.mark("a")
	for range 6 { // 50, 100, 200, 400, 800 ms, then 1 s
		co, names := e.out(t, "g")
		eq(t, "revisit", names, []string{"a"})
		co.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{})})
		e.clock.Advance(time.Second)
	}
	co, names := e.out(t, "g")
	eq(t, "before the push", names, []string{"a"})
	e.mark("a") // the push: marked while the entry is checked out
	co.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{})})
	co, names = e.out(t, "g") // marked meanwhile: back to ready at once
	eq(t, "marked meanwhile", names, []string{"a"})
	co.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{})}) // still not ticked
	e.clock.Advance(50 * time.Millisecond)
	eq(t, "revisited after RevisitMin", e.listed(t, "g"), []string{"a"})
}

// A reseed row that turns out empty is cleared by that one empty verdict:
// the reseed saw the work at the latest tick, which the pop sees too, so it
// gets no empty grace (with the grace, every stale-in-excess row cost about
// six more empty pop-list probes per reseed). A push mark still gets it.
func TestReseedRowEmptyClearsAtOnce(t *testing.T) {
	e := setup(t, Options{}) // EmptyGrace 2 s
	e.rs.rows[e.key+"|g"] = []ReseedRow{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}}
	e.clock.Advance(time.Minute) // no push mark within the grace
	co, names := e.out(t, "g")   // cold: the reseed lists a and b
	eq(t, "reseeded", names, []string{"a", "b"})
	e.h.Mark(e.key, ByID(2, "b"), SourcePush) // b: pushed while checked out
	co.CheckIn([]Verdict{{PartitionID: 1, Partition: "a", Kind: VerdictEmpty}, {PartitionID: 2, Partition: "b", Kind: VerdictEmpty}})
	// b was marked meanwhile: ready again. a: cleared, not revisited.
	co, names = e.out(t, "g")
	eq(t, "after the empty verdicts", names, []string{"b"})
	co.CheckIn([]Verdict{{PartitionID: 2, Partition: "b", Kind: VerdictEmpty}}) // b: within its push's grace
	e.clock.Advance(time.Second)
	eq(t, "a second later", e.listed(t, "g"), []string{"b"})
	st := e.h.Stats()
	if st.Empty != 3 || st.Ready != 1 || st.Wheel != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The periodic reseed lists a again (the fake still returns it): one
	// more empty verdict clears it again, with no revisit.
	e.clock.Advance(time.Minute)
	if n := e.h.ReseedDue(ctxT(t)); n != 1 {
		t.Fatalf("reseeds %d", n)
	}
	co, names = e.out(t, "g")
	eq(t, "periodic reseed", names, []string{"a", "b"})
	co.CheckIn([]Verdict{{PartitionID: 1, Partition: "a", Kind: VerdictEmpty}, {PartitionID: 2, Partition: "b", Kind: VerdictEmpty}})
	for i := 0; i < 20; i++ {
		e.clock.Advance(100 * time.Millisecond)
		eq(t, "revisits", e.listed(t, "g"), nil)
	}
}

// A cold ring's reseed (on the pop path) counts as its first: the periodic
// reseed follows one interval later less the ring's phase (30 s − 7.5 s
// here), not at the phase point right after the cold scan.
func TestColdReseedCountsAsFirst(t *testing.T) {
	e := setup(t, Options{})
	e.rs.rows[e.key+"|g"] = []ReseedRow{{ID: 1, Name: "a"}}
	eq(t, "cold", e.listed(t, "g"), []string{"a"})
	e.clock.Advance(22499 * time.Millisecond)
	if n := e.h.ReseedDue(ctxT(t)); n != 0 {
		t.Fatalf("a periodic reseed %v after the cold one", 22499*time.Millisecond)
	}
	e.clock.Advance(time.Millisecond)
	if n := e.h.ReseedDue(ctxT(t)); n != 1 {
		t.Fatalf("reseeds at interval - phase: %d", n)
	}
	e.clock.Advance(30*time.Second - time.Millisecond)
	if n := e.h.ReseedDue(ctxT(t)); n != 0 {
		t.Fatalf("reseed before the interval")
	}
	e.clock.Advance(time.Millisecond)
	if n := e.h.ReseedDue(ctxT(t)); n != 1 {
		t.Fatalf("reseed at the interval: %d", n)
	}
	if st := e.h.Stats(); st.Reseeds != 3 || st.ReseedRows != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// With ClaimsSeeMarks (pop_list closes its range at its own snapshot) an
// empty verdict for a partition marked before the check-out is final: the
// entry is cleared at once, no grace. A mark made after the check-out
// sends it back to ready (epoch), and without the option the grace keeps
// it backing off (a mark may precede the tick that makes it visible).
func TestClaimsSeeMarksClearsEmptyAtOnce(t *testing.T) {
	e := setup(t, Options{ClaimsSeeMarks: true}) // EmptyGrace 2 s
	e.listed(t, "g")
	e.mark("a")
	co, _ := e.out(t, "g")
	co.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{})})
	eq(t, "empty after a mark it saw", e.listed(t, "g"), nil)
	e.clock.Advance(100 * time.Millisecond)
	eq(t, "no revisit", e.listed(t, "g"), nil)

	e.mark("a")
	co, _ = e.out(t, "g")
	e.mark("a") // after the check-out: not seen by that pop
	co.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{})})
	eq(t, "marked meanwhile", e.listed(t, "g"), []string{"a"})
}

// Without ClaimsSeeMarks the grace keeps such an entry backing off.
func TestEmptyAfterMarkBacksOffWithoutClaimsSeeMarks(t *testing.T) {
	g := setup(t, Options{}) // the grace
	g.listed(t, "g")
	g.mark("a")
	co, _ := g.out(t, "g")
	co.CheckIn([]Verdict{verdict("a", VerdictEmpty, false, time.Time{})})
	eq(t, "without the option: backing off", g.listed(t, "g"), nil)
	g.clock.Advance(100 * time.Millisecond)
	eq(t, "without the option: revisited", g.listed(t, "g"), []string{"a"})
}

// A push mark whose waiters the caller wakes itself marks the partition
// but wakes nobody, now or at the tick (the broker's gate woke them).
func TestPushWokenMarkDoesNotWake(t *testing.T) {
	e := setup(t, Options{})
	e.listed(t, "g")
	wake, cancel := e.h.Subscribe(e.key)
	defer cancel()
	e.h.Mark(e.key, PartRef{ID: NoID, Name: "a"}, SourcePushWoken)
	if n := e.h.WakeTick(); n != 0 {
		t.Fatalf("the tick woke %d keys, want 0", n)
	}
	select {
	case <-wake:
		t.Fatal("a push mark woken by its caller woke the hot-list's waiter too")
	default:
	}
	if co, _ := e.out(t, "g"); len(co.Candidates()) != 1 {
		t.Fatalf("candidates after the mark: %+v, want a", co.Candidates())
	}
}
