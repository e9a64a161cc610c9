package hotlist

import (
	"context"
	"sync"
	"time"
)

// hintKey coalesces hints: by partition name, or by id for a hint that
// names the partition by id only (id is NoID when a name is set).
type hintKey struct {
	key, part string
	id        int32
}

// hintSet is the outgoing, coalesced, bounded set of dirty hints.
type hintSet struct {
	mu  sync.Mutex
	m   map[hintKey]int32
	max int
	// kick (buffer 1) wakes the sleeping hint sender: sent by add, after
	// the hint is in the set, whenever the set is not empty.
	kick chan struct{}
}

func (s *hintSet) add(h *HotList, hint Hint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		if len(s.m) > 0 {
			kickChan(s.kick)
		}
	}()
	k := hintKey{hint.Key, hint.Partition, NoID}
	if hint.Partition == "" {
		k.id = hint.ID
	}
	if id, ok := s.m[k]; ok {
		if id == NoID && hint.ID != NoID {
			s.m[k] = hint.ID
		}
		h.st.hintsCoalesced.Add(1)
		return
	}
	if len(s.m) >= s.max {
		h.st.hintsDropped.Add(1) // healed by the next reseed on the peers
		return
	}
	s.m[k] = hint.ID
}

func (s *hintSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *hintSet) take(n int) []Hint {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Hint, 0, min(n, len(s.m)))
	for k, id := range s.m {
		if len(out) == n {
			break
		}
		out = append(out, Hint{Key: k.key, Partition: k.part, ID: id})
		delete(s.m, k)
	}
	return out
}

// FlushHints sends the collected hints to the peers in batches of
// HintBatch. A failed batch is dropped (counted): peers heal it at their
// next reseed. The background loop calls it every HintFlush while the set
// is not empty.
func (h *HotList) FlushHints(ctx context.Context) int {
	p := h.o.Peers
	if p == nil {
		return 0
	}
	sent := 0
	for {
		batch := h.hints.take(h.o.HintBatch)
		if len(batch) == 0 {
			return sent
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := p.SendHints(sctx, batch)
		cancel()
		if err != nil {
			h.st.hintsDropped.Add(uint64(len(batch)))
			h.o.Logger.Warn("hot-list: sending dirty hints to peers failed; they heal at their next reseed",
				"hints", len(batch), "err", err)
			return sent
		}
		h.st.hintsSent.Add(uint64(len(batch)))
		sent += len(batch)
	}
}

// ReceiveHints applies hints from another broker: each is a mark (source
// peer) that wakes local waiters and is never sent on. A hint's ID is NoID
// when the sender did not know it (0 is a valid id).
func (h *HotList) ReceiveHints(hints []Hint) {
	for _, x := range hints {
		h.st.hintsReceived.Add(1)
		h.Mark(x.Key, PartRef{ID: x.ID, Name: x.Partition}, SourcePeer)
	}
}
