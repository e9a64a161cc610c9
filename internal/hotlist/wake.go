package hotlist

import (
	"sync"
	"time"
)

type gate struct{ ch chan struct{} }

// wakeHub holds the long-poll gates per key and the keys marked since the
// last wake tick.
type wakeHub struct {
	mu      sync.Mutex
	gates   map[string]map[*gate]struct{}
	pending map[string]struct{}
	// kick (buffer 1) wakes the sleeping wake loop: sent after a key
	// became pending, a wheel entry was pushed, or a gate subscribed on a
	// queue with wheel entries (the states a round can wake on).
	kick chan struct{}
}

// kickLoop wakes the wake loop if it sleeps; call it after the state
// change it announces.
func (w *wakeHub) kickLoop() { kickChan(w.kick) }

func kickChan(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Subscribe returns a channel that receives (coalesced, never blocking the
// sender) when queue key may have new work: a mark, a promoted ack, a due
// wheel entry, a reseed that found rows. cancel unsubscribes; call it when
// the parked pop ends.
func (h *HotList) Subscribe(key string) (wake <-chan struct{}, cancel func()) {
	g := &gate{ch: make(chan struct{}, 1)}
	w := &h.wake
	w.mu.Lock()
	m := w.gates[key]
	if m == nil {
		m = map[*gate]struct{}{}
		w.gates[key] = m
	}
	first := len(m) == 0
	m[g] = struct{}{}
	w.mu.Unlock()
	// A wheel entry pushed while nobody waited on key kicked a round that
	// skipped the key; now that a gate waits, the sleeping loop must look.
	// Checked after the gate is in: a push before the check is seen here,
	// one after it kicks a round that sees the gate. Only for the key's
	// first gate: while others wait, the key has waited since a kick of
	// its own (the round that took it read its wheel), so the loop already
	// naps for its entries - a long-poll arriving on a busy queue does not
	// wake the loop.
	if q := h.lookup(key); first && q != nil && q.wheelHint.Load() != 0 {
		w.kickLoop()
	}
	var once sync.Once
	return g.ch, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if m := w.gates[key]; m != nil {
				delete(m, g)
				if len(m) == 0 {
					delete(w.gates, key)
				}
			}
		})
	}
}

func (w *wakeHub) now(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notify(key)
	delete(w.pending, key)
}

func (w *wakeHub) notify(key string) {
	for g := range w.gates[key] {
		select {
		case g.ch <- struct{}{}:
		default:
		}
	}
}

// later queues a wake for the next tick; keys nobody waits on are skipped.
func (w *wakeHub) later(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.gates[key]) > 0 {
		w.pending[key] = struct{}{}
		w.kickLoop() // after the key is pending (the send never blocks)
	}
}

// WakeTick wakes every key marked since the previous tick once, and every
// waited-on key whose wheel has a due entry. The background loop calls it
// every Options.WakeTick while there is something it could wake. It
// returns how many keys it woke.
func (h *HotList) WakeTick() int {
	n, _ := h.wakeRound()
	return n
}

// maxNap bounds the loop's sleep until the earliest waited-on wheel
// entry: the wheel runs on the wall clock, the sleep on the monotonic
// one, so a clock stepped forward finds a due entry at most this late.
const maxNap = time.Second

// wakeRound is WakeTick; wait tells the loop when the next round is
// needed (see demandLoop): at the next tick while keys were pending or a
// waited-on queue has a wheel entry due within a tick (or due and not
// taken yet: its gates are woken again each tick, as always); at the tick
// where the earliest waited-on entry falls due when that is further away
// (real clock only: a test's fake clock does not move with the timer);
// after a kick when no waited-on queue has wheel entries.
func (h *HotList) wakeRound() (n int, wait time.Duration) {
	w := &h.wake
	w.mu.Lock()
	n = len(w.pending)
	pending := n > 0
	for key := range w.pending {
		w.notify(key)
	}
	clear(w.pending)
	keys := make([]string, 0, len(w.gates))
	for key := range w.gates {
		keys = append(keys, key)
	}
	w.mu.Unlock()
	now := h.now()
	earliest := int64(0)
	for _, key := range keys {
		q := h.lookup(key)
		if q == nil {
			continue
		}
		if q.due(now) {
			w.now(key)
			n++
		}
		// Read after due's refresh: a hint that only stale entries held is
		// cleared there, so a queue whose parks all ended stops the loop.
		if at := q.wheelHint.Load(); at != 0 && (earliest == 0 || at < earliest) {
			earliest = at
		}
	}
	switch {
	case pending:
		return n, 0
	case earliest == 0:
		return n, -1
	}
	if _, real := h.o.Clock.(realClock); !real {
		return n, 0
	}
	if d := time.Duration(earliest - now); d > h.o.WakeTick {
		return n, min(d, maxNap)
	}
	return n, 0
}

// due reports whether some ring of q has a due wheel entry. The hint
// answers without locks while nothing can be due; otherwise the rings are
// looked at and the hint refreshed.
func (q *queue) due(now int64) bool {
	hint := q.wheelHint.Load()
	if hint == 0 || hint > now {
		return false
	}
	parks := q.wheelParks.Load()
	q.mu.RLock()
	defer q.mu.RUnlock()
	earliest := int64(0)
	for _, r := range q.list {
		for i := range r.subs {
			s := &r.subs[i]
			s.mu.Lock()
			at := s.nextDue()
			s.mu.Unlock()
			if at != 0 && (earliest == 0 || at < earliest) {
				earliest = at
			}
		}
	}
	// Refresh the hint only if no entry entered a wheel during the scan
	// (it might be earlier than what the scan saw); else rescan next tick.
	if q.wheelParks.Load() == parks {
		q.wheelHint.CompareAndSwap(hint, earliest)
	}
	return earliest != 0 && earliest <= now
}
