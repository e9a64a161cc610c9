package hotlist

import (
	"sync"
)

type gate struct{ ch chan struct{} }

// wakeHub holds the long-poll gates per key and the keys marked since the
// last wake tick.
type wakeHub struct {
	mu      sync.Mutex
	gates   map[string]map[*gate]struct{}
	pending map[string]struct{}
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
	m[g] = struct{}{}
	w.mu.Unlock()
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
	}
}

// WakeTick wakes every key marked since the previous tick once, and every
// waited-on key whose wheel has a due entry. The background loop calls it
// every WakeTick (≈5 ms). It returns how many keys it woke.
func (h *HotList) WakeTick() int {
	w := &h.wake
	w.mu.Lock()
	n := len(w.pending)
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
	for _, key := range keys {
		if q := h.lookup(key); q != nil && q.due(now) {
			w.now(key)
			n++
		}
	}
	return n
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
