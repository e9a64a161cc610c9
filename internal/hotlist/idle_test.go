package hotlist

import (
	"context"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// The background loops run on demand: these tests use the real clock and
// Start, and look at the loops' rounds and sleep (HotList.st.wakeLoop,
// hintLoop).

func startIdle(t *testing.T, o Options) *HotList {
	t.Helper()
	t.Parallel()
	o.Logger = quietLogger()
	o.DisableSweep, o.LogInterval = true, -1
	h := New(o)
	ctx, cancel := context.WithCancel(ctxT(t))
	h.Start(ctx)
	t.Cleanup(func() {
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := h.Stop(sctx); err != nil {
			t.Error(err)
		}
	})
	return h
}

// settle waits until the loop sleeps (waits for a kick) and returns its
// rounds; a free-running loop never sleeps.
func settle(t *testing.T, what string, ls *loopStats) uint64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Asleep twice with no round between: not a kick about to be taken.
		r := ls.rounds.Load()
		if ls.asleep.Load() {
			time.Sleep(5 * time.Millisecond)
			if ls.asleep.Load() && ls.rounds.Load() == r {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %s loop never sleeps while idle (%d rounds)", what, ls.rounds.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// stillIdle checks that no round ran for d.
func stillIdle(t *testing.T, what string, ls *loopStats, d time.Duration) {
	t.Helper()
	before := ls.rounds.Load()
	time.Sleep(d)
	if n := ls.rounds.Load() - before; n != 0 {
		t.Fatalf("the %s loop ran %d rounds in %v of idle", what, n, d)
	}
}

func waitWake(t *testing.T, wake <-chan struct{}, what string) time.Time {
	t.Helper()
	select {
	case <-wake:
		return time.Now()
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the parked gate was not woken", what)
		return time.Time{}
	}
}

// (a) A parked gate and no marks: after the activity ends, no wake rounds.
func TestWakeLoopSleepsWhileIdle(t *testing.T) {
	const tick = time.Millisecond
	h := startIdle(t, Options{WakeTick: tick, EmptyGrace: -1})
	key := queuekey.Make("t", "q")
	co, err := h.Checkout(ctxT(t), Request{Key: key, Group: "g", Batch: 1}) // the ring
	if err != nil {
		t.Fatal(err)
	}
	co.CheckIn(nil)
	wake, unsub := h.Subscribe(key)
	defer unsub()
	h.Mark(key, PartRef{ID: NoID, Name: "a"}, SourcePush)
	waitWake(t, wake, "first mark")
	settle(t, "wake", &h.st.wakeLoop)
	stillIdle(t, "wake", &h.st.wakeLoop, 200*tick)
	// A wheel entry keeps it running only until the entry is gone: the
	// lease below ends, its wake is taken, the entry is checked out and
	// its empty verdict clears it (no grace).
	co, err = h.Checkout(ctxT(t), Request{Key: key, Group: "g", Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if c := co.Candidates(); len(c) != 1 {
		t.Fatalf("candidates %v", c)
	}
	co.CheckIn([]Verdict{{PartitionID: NoID, Partition: "a", Kind: VerdictLeased, Until: time.Now().Add(20 * time.Millisecond)}})
	select {
	case <-wake: // a stale wake from before
	default:
	}
	waitWake(t, wake, "lease end")
	co, err = h.Checkout(ctxT(t), Request{Key: key, Group: "g", Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	co.CheckIn([]Verdict{{PartitionID: NoID, Partition: "a", Kind: VerdictEmpty}})
	if st := h.Stats(); st.Wheel+st.Ready+st.Inflight != 0 {
		t.Fatalf("not cleared: %+v", st)
	}
	settle(t, "wake", &h.st.wakeLoop)
	stillIdle(t, "wake", &h.st.wakeLoop, 200*tick)
}

// (b) A quiet mark after a long idle stretch wakes within a few periods.
func TestWakeLoopQuietMarkAfterIdle(t *testing.T) {
	const tick = 5 * time.Millisecond
	h := startIdle(t, Options{WakeTick: tick})
	key := queuekey.Make("t", "q")
	wake, unsub := h.Subscribe(key)
	defer unsub()
	settle(t, "wake", &h.st.wakeLoop)
	time.Sleep(300 * time.Millisecond)
	at := time.Now()
	h.Mark(key, PartRef{ID: NoID, Name: "a"}, SourcePush)
	got := waitWake(t, wake, "quiet mark after idle")
	// A round comes at the next tick; allow for a loaded machine.
	if d := got.Sub(at); d > 100*tick {
		t.Fatalf("woken %v after the mark (tick %v)", d, tick)
	}
}

// leaseLater makes a ring for key with partition a, then (at the caller's
// moment) checks a out and parks it leased until until, without any mark.
func leaseLater(t *testing.T, h *HotList, key string) func(until time.Time) {
	t.Helper()
	co, err := h.Checkout(ctxT(t), Request{Key: key, Group: "g", Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	co.CheckIn(nil)
	h.Mark(key, PartRef{ID: NoID, Name: "a"}, SourcePush) // nobody waits yet: no wake, no kick
	return func(until time.Time) {
		co, err := h.Checkout(ctxT(t), Request{Key: key, Group: "g", Batch: 1})
		if err != nil {
			t.Fatal(err)
		}
		if c := co.Candidates(); len(c) != 1 || c[0].Name != "a" {
			t.Fatalf("candidates %v", c)
		}
		co.CheckIn([]Verdict{{PartitionID: NoID, Partition: "a", Kind: VerdictLeased, Until: until}})
	}
}

// (c) A leased entry parked while the loop sleeps wakes its gate at about
// its due time (the wheel push kicks the loop).
func TestWakeLoopParkedEntryWhileAsleep(t *testing.T) {
	_, park, wake := parkedGate(t, time.Millisecond)
	until := time.Now().Add(100 * time.Millisecond)
	park(until)
	got := waitWake(t, wake, "lease end")
	wokenAfter(t, got, until, time.Second, "")
}

// (c') The entry parked while nobody waited (its kick found no gate); a
// gate that subscribes later, while the loop sleeps, is woken at the due
// time (Subscribe kicks).
func TestWakeLoopSubscribeAfterPark(t *testing.T) {
	const tick = time.Millisecond
	h := startIdle(t, Options{WakeTick: tick, LeasedSlack: time.Millisecond})
	key := queuekey.Make("t", "q")
	park := leaseLater(t, h, key)
	until := time.Now().Add(300 * time.Millisecond)
	park(until)
	// The rounds the park kicked see no gate and stop.
	settle(t, "wake", &h.st.wakeLoop)
	wake, unsub := h.Subscribe(key)
	defer unsub()
	got := waitWake(t, wake, "lease end, subscribed later")
	wokenAfter(t, got, until, time.Second, "")
}

// (d) The hint sender sleeps while the set is empty, and hints added
// after an idle stretch are sent.
func TestHintLoopSendsAfterIdle(t *testing.T) {
	const flush = time.Millisecond
	p := &fakePeers{peers: true}
	h := startIdle(t, Options{Peers: p, HintFlush: flush})
	key := queuekey.Make("t", "q")
	settle(t, "hint", &h.st.hintLoop)
	stillIdle(t, "hint", &h.st.hintLoop, 200*flush)
	h.Mark(key, PartRef{ID: NoID, Name: "a"}, SourcePush)
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		n := len(p.sent)
		p.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hint not sent (pending %d)", h.Stats().HintsPending)
		}
		time.Sleep(flush)
	}
	settle(t, "hint", &h.st.hintLoop)
	stillIdle(t, "hint", &h.st.hintLoop, 200*flush)
}

// (e) A waited-on queue whose only wheel entry falls due later: the loop
// sleeps until the tick where it is due (a handful of rounds, not one per
// tick), and still wakes the gate then.
func TestWakeLoopNapsUntilParkedEntry(t *testing.T) {
	const tick = time.Millisecond
	h, park, wake := parkedGate(t, tick)
	before := h.st.wakeLoop.rounds.Load()
	until := time.Now().Add(400 * time.Millisecond)
	park(until)
	got := waitWake(t, wake, "lease end")
	wokenAfter(t, got, until, time.Second, "")
	// The push's round, the one where it is due; a few more on a slow
	// machine. A round per tick would be ~400.
	n := h.st.wakeLoop.rounds.Load() - before
	t.Logf("%d rounds over the park", n)
	if n > 20 {
		t.Fatalf("%d rounds over a %v park (tick %v)", n, 400*time.Millisecond, tick)
	}
}

// (f) An entry parked earlier than the one the loop naps for cuts the nap
// short (its push kicks).
func TestWakeLoopNapCutShort(t *testing.T) {
	const tick = time.Millisecond
	h := startIdle(t, Options{WakeTick: tick, LeasedSlack: time.Millisecond})
	late, early := queuekey.Make("t", "late"), queuekey.Make("t", "early")
	parkLate, parkEarly := leaseLater(t, h, late), leaseLater(t, h, early)
	_, unsubLate := h.Subscribe(late)
	defer unsubLate()
	wake, unsub := h.Subscribe(early)
	defer unsub()
	settle(t, "wake", &h.st.wakeLoop)
	parkLate(time.Now().Add(3 * time.Second)) // the loop naps maxNap (1 s)
	time.Sleep(50 * time.Millisecond)
	until := time.Now().Add(100 * time.Millisecond)
	parkEarly(until)
	got := waitWake(t, wake, "the earlier lease end")
	wokenAfter(t, got, until, 600*time.Millisecond, ": the nap was not cut short")
}

// wokenAfter fails unless a gate woken at got was woken once the lease
// ended at until, and at most late after it (why: what being late means).
func wokenAfter(t *testing.T, got, until time.Time, late time.Duration, why string) {
	t.Helper()
	if got.Before(until) {
		t.Fatalf("woken %v before the lease ended", until.Sub(got))
	}
	if d := got.Sub(until); d > late {
		t.Fatalf("woken %v after the lease ended%s", d, why)
	}
}

// parkedGate starts an idle hot-list (wake tick every tick) with a gate
// parked on one queue, whose partition park(until) leases until then, and
// returns once the wake loop sleeps.
func parkedGate(t *testing.T, tick time.Duration) (*HotList, func(time.Time), <-chan struct{}) {
	t.Helper()
	h := startIdle(t, Options{WakeTick: tick, LeasedSlack: time.Millisecond})
	key := queuekey.Make("t", "q")
	park := leaseLater(t, h, key)
	wake, unsub := h.Subscribe(key)
	t.Cleanup(unsub)
	settle(t, "wake", &h.st.wakeLoop)
	return h, park, wake
}

// (g) An entry parked later than one the loop already naps for does not
// kick the loop (a pop parking its partitions after leased claims would
// otherwise wake it every time); the earlier one still wakes the gate when
// due.
func TestWakeLoopLaterEntryDoesNotKick(t *testing.T) {
	const tick = time.Millisecond
	h := startIdle(t, Options{WakeTick: tick, LeasedSlack: time.Millisecond})
	key := queuekey.Make("t", "q")
	co, err := h.Checkout(ctxT(t), Request{Key: key, Group: "g", Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	co.CheckIn(nil)
	h.Mark(key, PartRef{ID: NoID, Name: "a"}, SourcePush) // nobody waits yet: no wake, no kick
	h.Mark(key, PartRef{ID: NoID, Name: "b"}, SourcePush)
	wake, unsub := h.Subscribe(key)
	defer unsub()
	settle(t, "wake", &h.st.wakeLoop)
	lease := func(until time.Time) {
		t.Helper()
		co, err := h.Checkout(ctxT(t), Request{Key: key, Group: "g", Batch: 1, Partitions: 1})
		if err != nil {
			t.Fatal(err)
		}
		c := co.Candidates()
		if len(c) != 1 {
			t.Fatalf("candidates %v", c)
		}
		co.CheckIn([]Verdict{{PartitionID: NoID, Partition: c[0].Name, Kind: VerdictLeased, Until: until}})
	}
	first := time.Now().Add(900 * time.Millisecond)
	lease(first)
	// The loop takes the kick and naps until the first entry is due.
	for r := h.st.wakeLoop.rounds.Load(); ; {
		time.Sleep(20 * time.Millisecond)
		n := h.st.wakeLoop.rounds.Load()
		if n == r {
			break
		}
		r = n
	}
	before := h.st.wakeLoop.rounds.Load()
	lease(first.Add(time.Second))
	time.Sleep(200 * time.Millisecond)
	if time.Now().Before(first) {
		if n := h.st.wakeLoop.rounds.Load() - before; n != 0 {
			t.Fatalf("the later entry ran %d wake rounds before the earlier one was due", n)
		}
	}
	got := waitWake(t, wake, "the first lease end")
	wokenAfter(t, got, first, time.Second, "")
}

// (h) A long-poll subscribing to a queue others already wait on, while
// the loop naps for that queue's wheel entry, does not kick the loop (the
// first gate's kick made the loop read the queue's wheel); the entry
// still wakes both gates when due.
func TestWakeLoopSecondGateDoesNotKick(t *testing.T) {
	h, park, wake := parkedGate(t, time.Millisecond)
	until := time.Now().Add(900 * time.Millisecond)
	park(until)
	for r := h.st.wakeLoop.rounds.Load(); ; { // the park's kick taken: the loop naps
		time.Sleep(20 * time.Millisecond)
		n := h.st.wakeLoop.rounds.Load()
		if n == r {
			break
		}
		r = n
	}
	before := h.st.wakeLoop.rounds.Load()
	wake2, unsub := h.Subscribe(queuekey.Make("t", "q"))
	defer unsub()
	time.Sleep(200 * time.Millisecond)
	if time.Now().Before(until) {
		if n := h.st.wakeLoop.rounds.Load() - before; n != 0 {
			t.Fatalf("a second gate ran %d wake rounds before the entry was due", n)
		}
	}
	wokenAfter(t, waitWake(t, wake, "first gate"), until, time.Second, "")
	wokenAfter(t, waitWake(t, wake2, "second gate"), until, time.Second, "")
}
