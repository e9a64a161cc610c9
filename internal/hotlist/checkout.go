package hotlist

import (
	"context"
	"fmt"
	"sync"
)

type outItem struct {
	idx   uint32
	sub   int
	pos   int32
	epoch uint32
	cand  Candidate
}

// checkout is the hot-list's Checkout: the drop guard of one pop.
type checkout struct {
	h     *HotList
	q     *queue
	r     *ring
	auto  bool
	token uint32
	items []outItem
	// covered (0: none): with ClaimsSeeMarks, the last mark number at the
	// check-out: the pop's claim sees every mark numbered up to it.
	covered uint64

	mu   sync.Mutex
	done bool
}

var _ CandidateSource = (*HotList)(nil)

// Checkout drains the ring's due wheel entries and checks out up to k
// candidates round-robin over its sub-rings (see Options.Width). A cold
// ring (first pop of the group on this broker, or after a seek, delete or
// sweep) is reseeded first; an error from that reseed is returned and the
// ring stays cold. An empty candidate list means "nothing known pending":
// the pop answers 204 (or parks) without asking the database.
func (h *HotList) Checkout(ctx context.Context, req Request) (Checkout, error) {
	q, r := h.getRing(req.Key, req.Group)
	if !r.seeded.Load() {
		if err := h.coldReseed(ctx, r, req.Prepare); err != nil {
			q.holds.Add(-1)
			return nil, fmt.Errorf("hot-list: seeding %s group %q: %w", printableKey(req.Key), req.Group, err)
		}
	}
	co := &checkout{h: h, q: q, r: r, auto: req.AutoAck, token: h.outSeq.Add(1)}
	if h.o.ClaimsSeeMarks {
		co.covered = h.markSeq.Load()
	}
	k, early := h.o.width(req.Partitions)
	batch := max(req.Batch, 1)
	now := h.now()
	shards := len(r.subs)
	for i := range r.subs {
		s := &r.subs[i]
		s.mu.Lock()
		s.drainDue(now)
		s.mu.Unlock()
	}
	q.mu.RLock()
	start := int(r.rr.Add(1)) % shards
	covered := 0
outer:
	for len(co.items) < k {
		progress := false
		for j := 0; j < shards; j++ {
			si := (start + j) % shards
			s := &r.subs[si]
			s.mu.Lock()
			pos := s.head
			if pos < 0 {
				s.mu.Unlock()
				continue
			}
			sl := &s.slots[pos]
			s.setState(pos, sl, stInflight)
			sl.out = co.token
			sl.outAt = now
			m := max(int(sl.marks), 1)
			it := outItem{idx: r.index(si, pos), sub: si, pos: pos, epoch: sl.epoch}
			s.mu.Unlock()
			p := q.parts[it.idx]
			it.cand = Candidate{ID: p.id, Name: p.name, Marks: m}
			co.items = append(co.items, it)
			progress = true
			covered += m
			if len(co.items) >= k || (early && covered >= batch) {
				break outer
			}
		}
		if !progress {
			break
		}
	}
	q.mu.RUnlock()
	h.st.checkouts.Add(1)
	h.st.candidates.Add(uint64(len(co.items)))
	if q.trace {
		names := make([]string, len(co.items))
		for i, it := range co.items {
			names[i] = it.cand.Name
		}
		h.trace(req.Key, "checkout", "group", req.Group, "k", k, "candidates", names)
	}
	return co, nil
}

// Candidates lists the checked-out partitions, each once.
func (c *checkout) Candidates() []Candidate {
	out := make([]Candidate, 0, len(c.items))
	ids := make(map[int32]bool, len(c.items))
	names := make(map[string]bool, len(c.items))
	for _, it := range c.items {
		if (it.cand.ID != NoID && ids[it.cand.ID]) || (it.cand.Name != "" && names[it.cand.Name]) {
			continue
		}
		if it.cand.ID != NoID {
			ids[it.cand.ID] = true
		}
		if it.cand.Name != "" {
			names[it.cand.Name] = true
		}
		out = append(out, it.cand)
	}
	return out
}

// CheckIn applies the pop-list's verdicts; candidates without a verdict
// (the batch was full before the pop-list reached them) go back to the
// ready list. Later calls, and Release after it, do nothing.
func (c *checkout) CheckIn(verdicts []Verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	defer c.q.holds.Add(-1)
	h := c.h
	// Verdicts by id and by name; a candidate known by name only is
	// matched by name and learns its id and UUID. Every item of a
	// partition gets its verdict (an entry interned twice, once by id and
	// once by name, is one partition).
	vByID := make(map[int32]int, len(verdicts))
	vByName := make(map[string]int, len(verdicts))
	for vi, v := range verdicts {
		if _, ok := vByID[v.PartitionID]; !ok {
			vByID[v.PartitionID] = vi
		}
		if _, ok := vByName[v.Partition]; !ok && v.Partition != "" {
			vByName[v.Partition] = vi
		}
	}
	match := make([]int, len(c.items)) // verdict index + 1
	for i, it := range c.items {
		vi, ok := -1, false
		if it.cand.ID != NoID {
			vi, ok = vByID[it.cand.ID]
		}
		if !ok && it.cand.Name != "" {
			vi, ok = vByName[it.cand.Name]
		}
		if !ok {
			continue
		}
		match[i] = vi + 1
		v := verdicts[vi]
		if (it.cand.ID == NoID && v.PartitionID != NoID) || it.cand.Name == "" || v.PartitionUUID != "" {
			c.q.withIndex(PartRef{ID: v.PartitionID, UUID: v.PartitionUUID, Name: v.Partition}, false, func(uint32) {})
		}
	}
	now := h.now()
	qo := h.queueOptions(c.q.key)
	wake := false
	for i, it := range c.items {
		var v *Verdict
		if match[i] > 0 {
			v = &verdicts[match[i]-1]
		}
		if h.checkIn(c, it, v, now, qo) {
			wake = true
		}
	}
	if wake {
		h.wake.later(c.q.key)
	}
}

// checkIn applies one verdict (nil: none). It reports whether the entry
// went back to the ready list.
func (h *HotList) checkIn(c *checkout, it outItem, v *Verdict, now int64, qo QueueOptions) bool {
	s := &c.r.subs[it.sub]
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := &s.slots[it.pos]
	if sl.state != stInflight || sl.out != c.token {
		return false // reclaimed by a reseed meanwhile
	}
	changed := sl.epoch != it.epoch
	// seen: the pop's claim saw the slot's last mark, so its empty /
	// drained verdict is final (no grace).
	seen := c.covered != 0 && sl.markSeq <= c.covered && qo.Delay == 0 && qo.Window == 0
	kind := "none"
	if v != nil {
		kind = v.Kind
	}
	defer func() {
		if c.q.trace {
			h.trace(c.q.key, "checkin", "group", c.r.group, "partition", it.cand.Name, "verdict", kind,
				"marked_meanwhile", changed, "state", stateNames[sl.state])
		}
	}()
	if v == nil {
		h.st.noVerdict.Add(1)
		s.setState(it.pos, sl, stReady)
		return true
	}
	switch v.Kind {
	case VerdictTook:
		h.st.took.Add(1)
		sl.empties = 0
		sl.marks = 0
		if !c.auto && !v.Until.IsZero() {
			at := min(v.Until.UnixNano(), now+int64(h.o.ParkMax))
			s.park(it.pos, sl, at, parkTook)
			sl.drained = v.Drained && !changed
			sl.seen = seen
			return false
		}
		switch {
		case v.Drained && !changed && (seen || h.mayClear(sl, now, qo)):
			s.setState(it.pos, sl, stIdle)
		case qo.Window > 0:
			s.park(it.pos, sl, now+int64(qo.Window), parkWindow) // re-arm the window
		case v.Drained && !changed:
			s.park(it.pos, sl, now+h.backoff(sl), parkRevisit)
		default:
			s.setState(it.pos, sl, stReady)
			return true
		}
	case VerdictLeased:
		h.st.leased.Add(1)
		at := now
		if !v.Until.IsZero() {
			at = v.Until.UnixNano()
		}
		s.park(it.pos, sl, at+int64(h.o.LeasedSlack), parkLeased)
	default: // empty (and anything unknown, treated as empty)
		h.st.empty.Add(1)
		switch {
		case changed:
			s.setState(it.pos, sl, stReady)
			return true
		case !seen && !h.mayClear(sl, now, qo):
			s.park(it.pos, sl, now+h.backoff(sl), parkRevisit)
		default:
			s.setState(it.pos, sl, stIdle)
			sl.marks = 0
			sl.empties = 0
		}
	}
	return false
}

// Release is the drop guard: every candidate not checked in goes back to
// the ready list (the request died: client gone, timeout, panic). Safe to
// call any number of times, and after CheckIn (then it does nothing).
func (c *checkout) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	defer c.q.holds.Add(-1)
	n := 0
	for _, it := range c.items {
		s := &c.r.subs[it.sub]
		s.mu.Lock()
		sl := &s.slots[it.pos]
		if sl.state == stInflight && sl.out == c.token {
			s.setState(it.pos, sl, stReady)
			n++
		}
		s.mu.Unlock()
	}
	c.h.st.released.Add(uint64(n))
	if n > 0 {
		c.h.wake.later(c.q.key)
	}
}
