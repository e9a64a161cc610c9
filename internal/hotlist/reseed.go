package hotlist

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// coldReseed seeds a ring on the pop path; concurrent pops of the same
// cold ring wait for the first one.
func (h *HotList) coldReseed(ctx context.Context, r *ring, prepare func(context.Context) error) error {
	r.seedMu.Lock()
	defer r.seedMu.Unlock()
	if r.seeded.Load() {
		return nil
	}
	if prepare != nil {
		if err := prepare(ctx); err != nil {
			return err
		}
	}
	if err := h.reseed(ctx, r); err != nil {
		return err
	}
	// The cold reseed was a full scan: it counts as the ring's first. The
	// next comes one interval later less the ring's random phase, so rings
	// created together still reseed apart, no scan is more than one
	// interval after the previous one, and a new ring does not scan twice
	// within its first ReseedPhase (the periodic reseed used to follow at
	// the phase point, 0–15 s after the cold one).
	next := h.now() + int64(h.o.ReseedInterval) - h.phase()
	if next <= h.now() {
		next = h.now() + int64(h.o.ReseedInterval)
	}
	r.nextReseed.Store(next)
	r.seeded.Store(true)
	return nil
}

// reseed runs the reseed scan of one ring: every row is a mark on this
// ring (leased rows park until their lease ends); then entries checked out
// longer than StrandedAfter are reclaimed. It runs even when the ring is
// busy: marks and check-outs go on between pages.
func (h *HotList) reseed(ctx context.Context, r *ring) error {
	rs := h.o.Reseeder
	if rs == nil {
		return nil
	}
	q := r.q
	q.holds.Add(1)
	defer q.holds.Add(-1)
	start := h.now()
	after := NoID
	rows, pages := 0, 0
	var err error
	for ; pages < h.o.ReseedMaxPages; pages++ {
		var page []ReseedRow
		page, err = rs.ReseedPage(ctx, q.key, r.group, after, h.o.ReseedPageSize)
		if err != nil {
			break
		}
		now := h.now()
		for _, row := range page {
			leased := int64(0)
			if !row.LeasedUntil.IsZero() {
				leased = row.LeasedUntil.UnixNano()
				if leased <= 0 {
					leased = 1
				}
			} else {
				leased = -1 // a reseed row with work, not leased
			}
			q.withIndex(PartRef{ID: row.ID, UUID: row.UUID, Name: row.Name}, true, func(idx uint32) {
				h.markSlot(r, idx, now, QueueOptions{}, leased)
			})
		}
		rows += len(page)
		if len(page) > 0 {
			after = page[len(page)-1].ID
		}
		if len(page) < h.o.ReseedPageSize {
			pages++
			break
		}
	}
	h.st.reseedRows.Add(uint64(rows))
	if err != nil {
		h.st.reseedErrors.Add(1)
		return fmt.Errorf("reseed after partition id %d: %w", after, err)
	}
	if pages >= h.o.ReseedMaxPages {
		h.o.Logger.Warn("hot-list reseed stopped at its page cap; partitions beyond it rely on marks",
			"key", printableKey(q.key), "group", r.group, "pages", pages, "last_id", after)
	}
	reclaimed := h.reclaim(r, start)
	h.st.reseeds.Add(1)
	if q.trace {
		h.trace(q.key, "reseed", "group", r.group, "rows", rows, "pages", pages, "reclaimed", reclaimed)
	}
	if rows > 0 || reclaimed > 0 {
		h.wake.later(q.key)
	}
	return nil
}

// reclaim returns stranded INFLIGHT entries (checked out before start -
// StrandedAfter) to the ready list.
func (h *HotList) reclaim(r *ring, start int64) int {
	limit := start - int64(h.o.StrandedAfter)
	n := 0
	for i := range r.subs {
		s := &r.subs[i]
		s.mu.Lock()
		if s.nInflight > 0 {
			for pos := range s.slots {
				sl := &s.slots[pos]
				if sl.state == stInflight && sl.outAt <= limit {
					sl.epoch++
					s.setState(int32(pos), sl, stReady)
					n++
				}
			}
		}
		s.mu.Unlock()
	}
	h.st.reclaimed.Add(uint64(n))
	return n
}

// ReseedDue runs the reseeds whose time has come (at most
// ReseedConcurrency at once) and waits for them. The background loop calls
// it about every second; tests call it after moving the clock. It returns
// how many reseeds ran.
func (h *HotList) ReseedDue(ctx context.Context) int {
	if h.o.Reseeder == nil || h.o.ReseedInterval < 0 {
		return 0
	}
	now := h.now()
	var due []*ring
	for _, q := range h.snapshot() {
		q.mu.RLock()
		for _, r := range q.list {
			if r.nextReseed.Load() <= now && r.seeded.Load() && r.reseeding.CompareAndSwap(false, true) {
				due = append(due, r)
			}
		}
		q.mu.RUnlock()
	}
	sem := make(chan struct{}, h.o.ReseedConcurrency)
	var wg sync.WaitGroup
	for _, r := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			// reseeding is cleared before wg.Done: a ReseedDue right after
			// this one returned must find the ring free (it did not, now and
			// then: TestColdReseedCountsAsFirst saw 0 reseeds under load).
			defer func() { r.reseeding.Store(false); <-sem; wg.Done() }()
			rctx, cancel := context.WithTimeout(ctx, max(h.o.ReseedInterval, 10*time.Second))
			defer cancel()
			if err := h.reseed(rctx, r); err != nil && ctx.Err() == nil {
				h.o.Logger.Warn("hot-list reseed failed; retrying at the next interval (entries stay listed, nothing is cleared)",
					"key", printableKey(r.q.key), "group", r.group, "err", err)
			}
			next := r.nextReseed.Load() + int64(h.o.ReseedInterval)
			if now := h.now(); next <= now {
				next = now + int64(h.o.ReseedInterval)
			}
			r.nextReseed.Store(next)
		}()
	}
	wg.Wait()
	return len(due)
}
