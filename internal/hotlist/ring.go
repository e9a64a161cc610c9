package hotlist

import (
	"sync"
	"sync/atomic"
)

// Slot states.
const (
	stIdle     uint8 = iota // nothing known pending
	stReady                 // on the ready list
	stWheel                 // in the wheel until revisit
	stInflight              // checked out by a pop
)

// Why a slot is in the wheel.
const (
	parkNone    uint8 = iota
	parkTook          // we took it with a lease: our ack pulls it back
	parkLeased        // leased elsewhere (or not claimable) until revisit
	parkRevisit       // empty verdict under grace / on a deferral queue
	parkDelay         // delayedProcessing
	parkWindow        // windowBuffer hold
)

var stateNames = [...]string{"IDLE", "READY", "WHEEL", "INFLIGHT"}

// slot is one partition's entry in one ring. Links are local positions
// (index / shards) inside the slot's sub-ring; -1 is nil.
type slot struct {
	prev, next int32
	epoch      uint32
	wheelSeq   uint32 // bumped whenever the slot enters the wheel
	out        uint32 // token of the checkout holding it (INFLIGHT)
	marks      uint16 // marks since last cleared (saturating)
	state      uint8
	park       uint8
	drained    bool
	// seen: the claim parked in the wheel (parkTook) saw the slot's last
	// mark (Options.ClaimsSeeMarks): its drained verdict is final, no
	// grace.
	seen      bool
	empties   uint8  // consecutive revisited empties (backoff exponent)
	revisit   int64  // unix ns (WHEEL)
	firstMark int64  // unix ns of the first mark since cleared (window)
	lastMark  int64  // unix ns
	markSeq   uint64 // HotList.markSeq of the last mark (0: none)
	outAt     int64  // unix ns of the checkout (INFLIGHT)
}

type wheelEntry struct {
	at  int64
	pos int32
	seq uint32
}

// subRing holds the slots with index % shards == its number.
type subRing struct {
	mu         sync.Mutex
	slots      []slot
	head, tail int32
	nReady     int
	nWheel     int
	nInflight  int
	wheel      []wheelEntry // binary min-heap on at; stale entries dropped lazily
	// hint is the queue's earliest-wheel-time hint (never later than the
	// truth; 0 = none), so the wake tick skips queues with nothing due
	// without taking their locks.
	hint  *atomic.Int64
	parks *atomic.Uint64 // counts wheel pushes, so a hint refresh can tell it raced one
	// kick wakes the hot-list's sleeping wake loop (wakeHub.kick) after a
	// push: it sleeps while no waited-on queue has wheel entries, and
	// this one may be waited on and come due without any mark.
	kick chan struct{}
}

func newSubRing() subRing { return subRing{head: -1, tail: -1} }

func (s *subRing) at(pos int32) *slot {
	for int(pos) >= len(s.slots) {
		s.slots = append(s.slots, slot{prev: -1, next: -1})
	}
	return &s.slots[pos]
}

func (s *subRing) count(st uint8, d int) {
	switch st {
	case stReady:
		s.nReady += d
	case stWheel:
		s.nWheel += d
	case stInflight:
		s.nInflight += d
	}
}

// setState leaves the current state (unlinking from the ready list) and
// enters st (linking at the ready tail). The wheel is handled by park.
func (s *subRing) setState(pos int32, sl *slot, st uint8) {
	if sl.state == stReady {
		s.unlink(pos, sl)
	}
	s.count(sl.state, -1)
	sl.state = st
	sl.park = parkNone
	s.count(st, 1)
	if st == stReady {
		s.append(pos, sl)
	}
}

func (s *subRing) append(pos int32, sl *slot) {
	sl.prev, sl.next = s.tail, -1
	if s.tail >= 0 {
		s.slots[s.tail].next = pos
	} else {
		s.head = pos
	}
	s.tail = pos
}

func (s *subRing) unlink(pos int32, sl *slot) {
	if sl.prev >= 0 {
		s.slots[sl.prev].next = sl.next
	} else {
		s.head = sl.next
	}
	if sl.next >= 0 {
		s.slots[sl.next].prev = sl.prev
	} else {
		s.tail = sl.prev
	}
	sl.prev, sl.next = -1, -1
}

// park puts the slot into the wheel at time at (unix ns).
func (s *subRing) park(pos int32, sl *slot, at int64, why uint8) {
	s.setState(pos, sl, stWheel)
	sl.park = why
	sl.revisit = at
	sl.wheelSeq++
	s.push(wheelEntry{at: at, pos: pos, seq: sl.wheelSeq})
}

// repark moves a slot already in the wheel to an earlier time.
func (s *subRing) repark(pos int32, sl *slot, at int64) {
	if at >= sl.revisit {
		return
	}
	sl.revisit = at
	sl.wheelSeq++
	s.push(wheelEntry{at: at, pos: pos, seq: sl.wheelSeq})
}

func (s *subRing) stale(e wheelEntry) bool {
	if int(e.pos) >= len(s.slots) {
		return true
	}
	sl := &s.slots[e.pos]
	return sl.state != stWheel || sl.wheelSeq != e.seq
}

// drainDue moves due wheel entries (at <= now) to the ready tail and drops
// stale ones met on the way. It returns how many became ready.
func (s *subRing) drainDue(now int64) int {
	n := 0
	for len(s.wheel) > 0 && (s.wheel[0].at <= now || s.stale(s.wheel[0])) {
		e := s.pop()
		if s.stale(e) {
			continue
		}
		sl := &s.slots[e.pos]
		s.setState(e.pos, sl, stReady)
		n++
	}
	// Compact when stale entries dominate (marks re-parking early).
	if len(s.wheel) > 64 && len(s.wheel) > 4*s.nWheel {
		live := s.wheel[:0]
		for _, e := range s.wheel {
			if !s.stale(e) {
				live = append(live, e)
			}
		}
		s.wheel = live
		for i := len(s.wheel)/2 - 1; i >= 0; i-- {
			s.down(i)
		}
	}
	return n
}

// nextDue is the earliest live wheel time, or 0 when none.
func (s *subRing) nextDue() int64 {
	for len(s.wheel) > 0 && s.stale(s.wheel[0]) {
		s.pop()
	}
	if len(s.wheel) == 0 {
		return 0
	}
	return s.wheel[0].at
}

func (s *subRing) push(e wheelEntry) {
	if s.hint != nil {
		s.parks.Add(1)
		earlier := false
		for {
			cur := s.hint.Load()
			if cur != 0 && cur <= e.at {
				break
			}
			if s.hint.CompareAndSwap(cur, e.at) {
				earlier = true
				break
			}
		}
		// After the hint: the round the kick starts reads it. (Non-blocking,
		// so fine under s.mu.) Only when the entry moved the queue's
		// earliest: the loop already wakes at (or was kicked for) an
		// earlier one, and the round then reads this entry too - a pop
		// that parks its partitions after a leased claim does not wake the
		// loop each time.
		if earlier {
			kickChan(s.kick)
		}
	}
	s.wheel = append(s.wheel, e)
	i := len(s.wheel) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s.wheel[p].at <= s.wheel[i].at {
			break
		}
		s.wheel[p], s.wheel[i] = s.wheel[i], s.wheel[p]
		i = p
	}
}

func (s *subRing) pop() wheelEntry {
	e := s.wheel[0]
	last := len(s.wheel) - 1
	s.wheel[0] = s.wheel[last]
	s.wheel = s.wheel[:last]
	if last > 0 {
		s.down(0)
	}
	return e
}

func (s *subRing) down(i int) {
	n := len(s.wheel)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.wheel[r].at < s.wheel[l].at {
			m = r
		}
		if s.wheel[i].at <= s.wheel[m].at {
			return
		}
		s.wheel[i], s.wheel[m] = s.wheel[m], s.wheel[i]
		i = m
	}
}

// ring is one (queue, group): sub-rings over the queue's interned indexes.
type ring struct {
	q     *queue
	group string
	subs  []subRing
	rr    atomic.Uint32

	// seedMu serializes the cold reseed; seeded flips once it succeeded.
	seedMu sync.Mutex
	seeded atomic.Bool

	nextReseed atomic.Int64 // unix ns
	reseeding  atomic.Bool
	detached   atomic.Bool // dropped (group delete, seek, sweep)
}

func newRing(q *queue, group string, shards int, kick chan struct{}) *ring {
	r := &ring{q: q, group: group, subs: make([]subRing, shards)}
	for i := range r.subs {
		r.subs[i] = newSubRing()
		r.subs[i].hint, r.subs[i].parks, r.subs[i].kick = &q.wheelHint, &q.wheelParks, kick
	}
	return r
}

func (r *ring) locate(idx uint32) (*subRing, int32) {
	n := uint32(len(r.subs))
	return &r.subs[idx%n], int32(idx / n)
}

func (r *ring) index(sub int, pos int32) uint32 {
	return uint32(pos)*uint32(len(r.subs)) + uint32(sub)
}

// totals counts ready, wheel and inflight entries.
func (r *ring) totals() (ready, wheel, inflight int) {
	for i := range r.subs {
		s := &r.subs[i]
		s.mu.Lock()
		ready += s.nReady
		wheel += s.nWheel
		inflight += s.nInflight
		s.mu.Unlock()
	}
	return
}

// allIdle reports whether every slot is IDLE.
func (r *ring) allIdle() bool {
	rd, wh, in := r.totals()
	return rd+wh+in == 0
}
