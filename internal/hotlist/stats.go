package hotlist

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"
)

type counters struct {
	marksLocal, marksRemote                      atomic.Uint64
	reseeds, reseedErrors, reseedRows, reclaimed atomic.Uint64
	checkouts, candidates                        atomic.Uint64
	took, empty, leased, noVerdict, released     atomic.Uint64
	hintsSent, hintsDropped, hintsCoalesced      atomic.Uint64
	hintsReceived                                atomic.Uint64
	swept                                        atomic.Uint64
	// The on-demand loops (not in Stats: the tests look at them).
	wakeLoop, hintLoop loopStats
}

type loopStats struct {
	rounds atomic.Uint64
	asleep atomic.Bool // waiting for a kick
}

// Stats is a snapshot of the hot-list: gauges (Queues … Inflight, Hints)
// and counters since New.
type Stats struct {
	Queues, Rings, Ready, Wheel, Inflight int
	HintsPending                          int

	MarksLocal, MarksRemote uint64
	Reseeds, ReseedErrors   uint64
	ReseedRows, Reclaimed   uint64
	Checkouts, Candidates   uint64
	// Verdict counts of check-ins; NoVerdict: candidates the pop-list did
	// not reach; Released: re-appended by the drop guard.
	Took, Empty, Leased, NoVerdict, Released uint64
	HintsSent, HintsDropped, HintsCoalesced  uint64
	HintsReceived                            uint64
	Swept                                    uint64
}

// RingStat is one ring of the top-N list.
type RingStat struct {
	Key                    string
	Group                  string
	Ready, Wheel, Inflight int
}

func (r RingStat) String() string {
	return fmt.Sprintf("%s[%s] ready=%d wheel=%d inflight=%d", printableKey(r.Key), r.Group, r.Ready, r.Wheel, r.Inflight)
}

// Stats walks every ring (it takes each sub-ring lock briefly).
func (h *HotList) Stats() Stats {
	var s Stats
	for _, q := range h.snapshot() {
		s.Queues++
		q.mu.RLock()
		for _, r := range q.list {
			s.Rings++
			rd, wh, in := r.totals()
			s.Ready += rd
			s.Wheel += wh
			s.Inflight += in
		}
		q.mu.RUnlock()
	}
	h.hints.mu.Lock()
	s.HintsPending = len(h.hints.m)
	h.hints.mu.Unlock()
	c := &h.st
	s.MarksLocal, s.MarksRemote = c.marksLocal.Load(), c.marksRemote.Load()
	s.Reseeds, s.ReseedErrors = c.reseeds.Load(), c.reseedErrors.Load()
	s.ReseedRows, s.Reclaimed = c.reseedRows.Load(), c.reclaimed.Load()
	s.Checkouts, s.Candidates = c.checkouts.Load(), c.candidates.Load()
	s.Took, s.Empty, s.Leased = c.took.Load(), c.empty.Load(), c.leased.Load()
	s.NoVerdict, s.Released = c.noVerdict.Load(), c.released.Load()
	s.HintsSent, s.HintsDropped, s.HintsCoalesced = c.hintsSent.Load(), c.hintsDropped.Load(), c.hintsCoalesced.Load()
	s.HintsReceived = c.hintsReceived.Load()
	s.Swept = c.swept.Load()
	return s
}

// Top returns the n rings with the most ready + wheel entries.
func (h *HotList) Top(n int) []RingStat {
	var all []RingStat
	for _, q := range h.snapshot() {
		q.mu.RLock()
		for _, r := range q.list {
			rd, wh, in := r.totals()
			if rd+wh+in > 0 {
				all = append(all, RingStat{Key: q.key, Group: r.group, Ready: rd, Wheel: wh, Inflight: in})
			}
		}
		q.mu.RUnlock()
	}
	slices.SortFunc(all, func(a, b RingStat) int {
		return cmp.Or(cmp.Compare(b.Ready+b.Wheel, a.Ready+a.Wheel), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Group, b.Group))
	})
	return all[:min(n, len(all))]
}

// LogStats writes the periodic summary line (see docs/design/hotlist.md);
// prev is the previous snapshot, for rates.
func (h *HotList) LogStats(prev Stats) Stats {
	s := h.Stats()
	top := h.Top(h.o.TopN)
	tops := make([]string, len(top))
	for i, t := range top {
		tops[i] = t.String()
	}
	h.o.Logger.Info("hot-list",
		"queues", s.Queues, "rings", s.Rings, "ready", s.Ready, "wheel", s.Wheel, "inflight", s.Inflight,
		"marks_local", s.MarksLocal-prev.MarksLocal, "marks_remote", s.MarksRemote-prev.MarksRemote,
		"reseeds", s.Reseeds-prev.Reseeds, "reseed_errors", s.ReseedErrors-prev.ReseedErrors,
		"reseed_rows", s.ReseedRows-prev.ReseedRows, "reclaimed", s.Reclaimed-prev.Reclaimed,
		"took", s.Took-prev.Took, "empty", s.Empty-prev.Empty, "leased", s.Leased-prev.Leased,
		"hints_sent", s.HintsSent-prev.HintsSent, "hints_dropped", s.HintsDropped-prev.HintsDropped,
		"swept", s.Swept-prev.Swept, "top", tops)
	return s
}
