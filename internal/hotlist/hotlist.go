package hotlist

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// HotList is the in-memory candidate source. All methods are safe for
// concurrent use.
type HotList struct {
	o Options

	mu     sync.RWMutex
	queues map[string]*queue

	optMu sync.RWMutex
	qopts map[string]QueueOptions

	outSeq atomic.Uint32
	// markSeq numbers the marks (not reseed rows): a slot keeps its last
	// one (slot.markSeq), a check-out notes the latest (ClaimsSeeMarks) -
	// a sequence, not the clock, which may step back.
	markSeq atomic.Uint64
	wake    wakeHub
	hints   hintSet
	st      counters
	svc     service
}

// queue is the state of one key: interning and the rings of its groups.
type queue struct {
	key   string
	trace bool

	mu     sync.RWMutex
	dead   bool // swept or deleted: callers look the key up again
	names  map[string]uint32
	parts  []partInfo // by index
	byID   map[int32]uint32
	byUUID map[string]uint32
	rings  map[string]*ring
	list   []*ring // the rings, for marks (rebuilt on change)

	holds   atomic.Int32 // checkouts and reseeds in progress
	touched atomic.Bool  // the sweep's second-chance flag

	wheelHint  atomic.Int64 // earliest wheel time of any ring (unix ns, 0 = none; may be early)
	wheelParks atomic.Uint64
}

type partInfo struct {
	name string
	id   int32
	uuid string
}

// New returns a hot-list. Start runs its background loops; without them
// the hot-list still serves (tests drive WakeTick, ReseedDue and Sweep).
func New(o Options) *HotList {
	o = o.withDefaults()
	h := &HotList{o: o, queues: map[string]*queue{}, qopts: map[string]QueueOptions{}}
	h.wake.gates = map[string]map[*gate]struct{}{}
	h.wake.pending = map[string]struct{}{}
	h.wake.kick = make(chan struct{}, 1)
	h.hints.kick = make(chan struct{}, 1)
	h.hints.m = map[hintKey]int32{}
	h.hints.max = o.HintSetMax
	return h
}

func (h *HotList) now() int64 { return h.o.Clock.Now().UnixNano() }

func (h *HotList) traced(key string) bool {
	if h.o.TracePrefix == "" {
		return false
	}
	_, q := queuekey.Split(key)
	return strings.HasPrefix(q, h.o.TracePrefix)
}

func (h *HotList) trace(key, msg string, args ...any) {
	h.o.Logger.Info("hotlist trace: "+msg, append([]any{"key", printableKey(key)}, args...)...)
}

func printableKey(key string) string { return strings.Replace(key, queuekey.Sep, "/", 1) }

// SetQueueOptions records a queue's delayedProcessing and windowBuffer
// (the broker calls it on configure and when it first serves a queue).
// The zero value removes them.
func (h *HotList) SetQueueOptions(key string, qo QueueOptions) {
	h.optMu.Lock()
	defer h.optMu.Unlock()
	if qo == (QueueOptions{}) {
		delete(h.qopts, key)
		return
	}
	h.qopts[key] = qo
}

func (h *HotList) queueOptions(key string) QueueOptions {
	h.optMu.RLock()
	defer h.optMu.RUnlock()
	return h.qopts[key]
}

func (h *HotList) lookup(key string) *queue {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.queues[key]
}

// resolve finds a partition's index; learn reports that ref carries an
// id, UUID or name the queue does not know yet. Call with q.mu held.
func (q *queue) resolve(ref PartRef) (idx uint32, ok, learn bool) {
	ok = false
	if ref.ID != NoID {
		idx, ok = q.byID[ref.ID]
	}
	if !ok && ref.UUID != "" {
		idx, ok = q.byUUID[ref.UUID]
	}
	if !ok && ref.Name != "" {
		idx, ok = q.names[ref.Name]
	}
	if !ok {
		return 0, false, false
	}
	p := q.parts[idx]
	learn = (ref.ID != NoID && p.id == NoID) || (ref.UUID != "" && p.uuid == "") || (ref.Name != "" && p.name == "")
	return idx, true, learn
}

// intern resolves ref, adding or completing its entry. Call with q.mu
// write-locked. A partition known by id only (an event that carried ids)
// is interned without a name until a verdict or reseed row names it. ok is
// false when ref has neither id nor name.
func (q *queue) intern(ref PartRef) (uint32, bool) {
	idx, ok, learn := q.resolve(ref)
	if !ok {
		if ref.Name == "" && ref.ID == NoID {
			return 0, false
		}
		idx = uint32(len(q.parts))
		q.parts = append(q.parts, partInfo{id: NoID})
		learn = true
	}
	if learn {
		p := &q.parts[idx]
		if ref.ID != NoID && p.id == NoID {
			p.id = ref.ID
			if _, dup := q.byID[ref.ID]; !dup {
				q.byID[ref.ID] = idx
			}
		}
		if ref.UUID != "" && p.uuid == "" {
			p.uuid = ref.UUID
			if _, dup := q.byUUID[ref.UUID]; !dup {
				q.byUUID[ref.UUID] = idx
			}
		}
		if ref.Name != "" && p.name == "" {
			p.name = ref.Name
			if _, dup := q.names[ref.Name]; !dup {
				q.names[ref.Name] = idx
			}
		}
	}
	return idx, true
}

// withIndex runs fn with ref's index under q.mu (read-locked when ref is
// known, write-locked when it must be interned or learned). It returns
// false when the queue is dead or ref cannot be resolved.
func (q *queue) withIndex(ref PartRef, create bool, fn func(idx uint32)) bool {
	q.mu.RLock()
	if q.dead {
		q.mu.RUnlock()
		return false
	}
	idx, ok, learn := q.resolve(ref)
	if ok && !learn {
		fn(idx)
		q.mu.RUnlock()
		return true
	}
	q.mu.RUnlock()
	if !ok && !create {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead {
		return false
	}
	idx, ok = q.intern(ref)
	if ok {
		fn(idx)
	}
	return ok
}

// Mark records that partition ref of queue key may have new work, on
// every existing ring of the queue (a queue without rings has nothing to
// update: its first pop reseeds from the database). Local marks (push,
// commit, DLQ) are also hinted to peers. Marks from push wake the queue's
// waiters at the next wake tick; commit and DLQ wake them now; a push
// whose waiters the caller wakes itself (SourcePushWoken) not at all.
func (h *HotList) Mark(key string, ref PartRef, src Source) {
	switch {
	case src.local():
		h.st.marksLocal.Add(1)
		if p := h.o.Peers; p != nil && (ref.Name != "" || ref.ID != NoID) && p.HasPeers() {
			h.hints.add(h, Hint{Key: key, Partition: ref.Name, ID: ref.ID})
		}
	case src == SourcePeer:
		h.st.marksRemote.Add(1)
	}
	if q := h.lookup(key); q != nil {
		q.touched.Store(true)
		now := h.now()
		qo := h.queueOptions(key)
		q.withIndex(ref, true, func(idx uint32) {
			for _, r := range q.list {
				h.markSlot(r, idx, now, qo, 0)
			}
		})
	}
	if h.traced(key) {
		h.trace(key, "mark", "partition", ref.Name, "id", ref.ID, "source", src.String())
	}
	switch {
	case src.wakeNow():
		h.wake.now(key)
	case src != SourcePushWoken:
		h.wake.later(key)
	}
}

// markSlot applies one mark to one ring. leasedUntil (unix ns, reseed
// rows only) parks an idle entry until the lease ends.
func (h *HotList) markSlot(r *ring, idx uint32, now int64, qo QueueOptions, leasedUntil int64) {
	s, pos := r.locate(idx)
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.at(pos)
	sl.epoch++
	if sl.marks < 0xffff {
		sl.marks++
	}
	if sl.state == stIdle {
		sl.firstMark = now
	}
	reseed := leasedUntil != 0
	if !reseed {
		// New work restarts the empty-verdict backoff, whatever the state:
		// without ClaimsSeeMarks a push marked while its entry is checked
		// out or backing off may be found empty until its tick, and must
		// be revisited after RevisitMin. A reseed row is not such a mark:
		// the scan saw the work, which later pops see too, so an empty
		// answer for it is final. Giving it the grace cost every stale-in-excess
		// reseed row about six more empty pop-list probes (50 ms … 1 s
		// over 2 s), per reseed: a cost that grew with the partitions.
		sl.empties = 0
		sl.lastMark = now
		sl.markSeq = h.markSeq.Add(1)
	}
	switch sl.state {
	case stInflight, stReady:
		// INFLIGHT: the epoch tells the check-in; READY: already listed.
	case stIdle:
		switch {
		case leasedUntil > 0:
			s.park(pos, sl, leasedUntil+int64(h.o.LeasedSlack), parkLeased)
		case !reseed && qo.Delay > 0:
			s.park(pos, sl, now+int64(qo.Delay+h.o.LeasedSlack), parkDelay)
		case !reseed && qo.Window > 0:
			s.park(pos, sl, now+int64(qo.Window), parkWindow)
		default:
			s.setState(pos, sl, stReady)
		}
	case stWheel:
		switch sl.park {
		case parkTook:
			// Our own consumer holds the lease: its ack pulls the entry
			// back (not drained any more), ParkMax bounds the wait.
			sl.drained = false
		case parkDelay:
			// The first mark's revisit is the earliest.
		case parkWindow:
			if int(sl.marks) >= h.o.WindowMarks {
				s.setState(pos, sl, stReady)
			}
		default:
			switch {
			case reseed && leasedUntil > 0:
				// still leased: keep the revisit
			case !reseed && qo.Delay > 0:
				s.repark(pos, sl, now+int64(qo.Delay+h.o.LeasedSlack))
			case !reseed && qo.Window > 0:
				s.repark(pos, sl, now+int64(qo.Window))
			default:
				s.setState(pos, sl, stReady)
			}
		}
	}
}

// Acked reports an ack of group on partition ref. A released lease pulls
// the entry out of the wheel: back to ready (and a wake) when work may be
// pending, cleared when the claim was drained and nothing was marked since.
func (h *HotList) Acked(key, group string, ref PartRef, out AckOutcome) {
	if !out.LeaseReleased {
		return
	}
	q := h.lookup(key)
	if q == nil {
		return
	}
	q.touched.Store(true)
	now := h.now()
	qo := h.queueOptions(key)
	woke := false
	q.withIndex(ref, false, func(idx uint32) {
		r := q.rings[group]
		if r == nil {
			return
		}
		s, pos := r.locate(idx)
		s.mu.Lock()
		defer s.mu.Unlock()
		sl := s.at(pos)
		switch sl.state {
		case stInflight:
			if out.Redeliver {
				sl.epoch++
			}
		case stIdle:
			if out.Redeliver {
				s.setState(pos, sl, stReady)
				woke = true
			}
		case stWheel:
			switch sl.park {
			case parkTook, parkLeased:
				if sl.park == parkTook && sl.drained && !out.Redeliver && (sl.seen || h.mayClear(sl, now, qo)) {
					s.setState(pos, sl, stIdle)
					sl.marks = 0
				} else {
					s.setState(pos, sl, stReady)
					woke = true
				}
			}
		}
	})
	if h.traced(key) {
		h.trace(key, "ack", "group", group, "partition", ref.Name, "uuid", ref.UUID, "redeliver", out.Redeliver, "promoted", woke)
	}
	if woke {
		h.wake.now(key)
	}
}

// mayClear: an entry may go IDLE only when its last mark is older than the
// grace (plus the queue's delay and window): a mark can precede the tick
// that makes its message visible.
func (h *HotList) mayClear(sl *slot, now int64, qo QueueOptions) bool {
	grace := h.o.EmptyGrace
	if grace < 0 {
		grace = 0
	}
	grace += qo.Delay + qo.Window
	return now-sl.lastMark >= int64(grace)
}

func (h *HotList) backoff(sl *slot) int64 {
	d := h.o.RevisitMin << min(sl.empties, 16)
	if d > h.o.RevisitMax || d <= 0 {
		d = h.o.RevisitMax
	}
	if sl.empties < 0xff {
		sl.empties++
	}
	return int64(d)
}

// getRing returns the ring of (key, group), creating queue and ring, with
// a hold on the queue (release with q.holds.Add(-1)).
func (h *HotList) getRing(key, group string) (*queue, *ring) {
	for {
		q := h.lookup(key)
		if q == nil {
			h.mu.Lock()
			if q = h.queues[key]; q == nil {
				q = &queue{key: key, trace: h.traced(key), names: map[string]uint32{},
					byID: map[int32]uint32{}, byUUID: map[string]uint32{}, rings: map[string]*ring{}}
				q.touched.Store(true)
				h.queues[key] = q
			}
			h.mu.Unlock()
		}
		q.mu.RLock()
		if q.dead {
			q.mu.RUnlock()
			continue
		}
		if r := q.rings[group]; r != nil {
			q.holds.Add(1)
			q.touched.Store(true)
			q.mu.RUnlock()
			return q, r
		}
		q.mu.RUnlock()
		q.mu.Lock()
		if q.dead {
			q.mu.Unlock()
			continue
		}
		r := q.rings[group]
		if r == nil {
			r = newRing(q, group, h.o.Shards, h.wake.kick)
			if h.o.Reseeder == nil {
				r.seeded.Store(true)
			}
			r.nextReseed.Store(h.now() + h.phase())
			q.rings[group] = r
			q.list = append(q.list[:len(q.list):len(q.list)], r)
		}
		q.holds.Add(1)
		q.touched.Store(true)
		q.mu.Unlock()
		return q, r
	}
}

func (h *HotList) phase() int64 {
	n := int64(h.o.ReseedPhase)
	if n <= 0 {
		return 0
	}
	if h.o.Rand != nil {
		return h.o.Rand(n)
	}
	return rand.Int64N(n)
}

// dropRing detaches (key, group)'s ring; the next pop creates a cold ring
// that reseeds from the database. Call with q.mu write-locked.
func (q *queue) dropRing(group string) bool {
	r := q.rings[group]
	if r == nil {
		return false
	}
	r.detached.Store(true)
	delete(q.rings, group)
	list := make([]*ring, 0, len(q.rings))
	for _, x := range q.list {
		if x != r {
			list = append(list, x)
		}
	}
	q.list = list
	return true
}

// GroupDeleted forgets group's rings on every queue of tenant (the DELETE
// /consumer-groups/:group route). It returns how many rings were dropped.
func (h *HotList) GroupDeleted(tenant, group string) int {
	prefix := queuekey.Make(tenant, "")
	n := 0
	for _, q := range h.snapshot() {
		if !strings.HasPrefix(q.key, prefix) {
			continue
		}
		q.mu.Lock()
		if q.dropRing(group) {
			n++
		}
		q.mu.Unlock()
	}
	return n
}

// GroupDeletedEverywhere forgets group's rings on every queue of every
// tenant (a group deleted from all queues at once). It returns how many
// rings were dropped.
func (h *HotList) GroupDeletedEverywhere(group string) int {
	n := 0
	for _, q := range h.snapshot() {
		q.mu.Lock()
		if q.dropRing(group) {
			n++
		}
		q.mu.Unlock()
	}
	return n
}

// WakeNow wakes the subscribers of key at once (a commit that acked
// without pushing, or a change the caller cannot name by partition).
func (h *HotList) WakeNow(key string) { h.wake.now(key) }

// QueueGroupDeleted forgets one (queue, group) ring (group delete on one
// queue).
func (h *HotList) QueueGroupDeleted(key, group string) bool { return h.forgetRing(key, group) }

// Seeked repairs (queue, group) after a seek: a cursor moved back creates
// pending work without any push, so the ring is forgotten and the next pop
// reseeds it from the database.
func (h *HotList) Seeked(key, group string) bool { return h.forgetRing(key, group) }

func (h *HotList) forgetRing(key, group string) bool {
	q := h.lookup(key)
	if q == nil {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropRing(group)
}

// Invalidate forgets every ring of key (not its interning): for a change
// of pending work the caller cannot name by partition. The next pop of
// each group reseeds from the database. It returns how many rings it
// dropped.
func (h *HotList) Invalidate(key string) int {
	q := h.lookup(key)
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for g := range q.rings {
		if q.dropRing(g) {
			n++
		}
	}
	return n
}

// QueueDeleted forgets everything about key, interning included (a queue
// created again gets new partition ids).
func (h *HotList) QueueDeleted(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[key]
	if q == nil {
		return
	}
	q.mu.Lock()
	for g := range q.rings {
		q.dropRing(g)
	}
	q.dead = true
	q.mu.Unlock()
	delete(h.queues, key)
}

func (h *HotList) snapshot() []*queue {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*queue, 0, len(h.queues))
	for _, q := range h.queues {
		out = append(out, q)
	}
	return out
}

// Sweep drops the state of idle queues: those whose second-chance flag
// stayed clear since the previous sweep, that nothing holds (no checkout,
// no reseed) and whose every slot is IDLE. It returns how many it dropped.
// The background loop calls it every SweepInterval.
func (h *HotList) Sweep() int {
	n := 0
	for _, q := range h.snapshot() {
		if q.touched.Swap(false) || q.holds.Load() > 0 {
			continue
		}
		h.mu.Lock()
		q.mu.Lock()
		ok := !q.dead && q.holds.Load() == 0 && !q.touched.Load()
		if ok {
			for _, r := range q.list {
				if !r.allIdle() {
					ok = false
					break
				}
			}
		}
		if ok {
			for g := range q.rings {
				q.dropRing(g)
			}
			q.dead = true
			delete(h.queues, q.key)
			n++
		}
		q.mu.Unlock()
		h.mu.Unlock()
	}
	h.st.swept.Add(uint64(n))
	return n
}
