package hotlist

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// sim drives random operations against a HotList and the model database.
type sim struct {
	h      *HotList
	db     *modelDB
	clock  *fakeClock
	keys   []string
	groups []string
	parts  int
}

var tenants = []string{"t0", "t1"}

// raceEnabled (set under -race) shortens the sequential model runs: the
// race detector is for the concurrent one.
var raceEnabled bool

func newSim(t testing.TB, o Options) *sim {
	c := newFakeClock()
	db := newModelDB(c)
	o.Clock, o.Reseeder, o.Logger = c, db, quietLogger()
	var seed atomic.Uint64
	o.Rand = func(n int64) int64 { return int64(seed.Add(0x9e3779b97f4a7c15)>>1) % n }
	s := &sim{h: New(o), db: db, clock: c, groups: []string{"__QUEUE_MODE__", "g1", "g2"}, parts: 24}
	for _, tn := range tenants {
		for q := 0; q < 3; q++ {
			s.keys = append(s.keys, queuekey.Make(tn, fmt.Sprintf("q%d", q)))
		}
	}
	return s
}

// step runs one random operation; held is the caller's leases. It
// returns a short description for the failure history.
func (s *sim) step(t testing.TB, rng *rand.Rand, held *[]heldLease) string {
	return s.stepDepth(t, rng, held, 0)
}

func (s *sim) stepDepth(t testing.TB, rng *rand.Rand, held *[]heldLease, depth int) string {
	key := s.keys[rng.IntN(len(s.keys))]
	group := s.groups[rng.IntN(len(s.groups))]
	part := fmt.Sprintf("p%d", rng.IntN(s.parts))
	h := s.h
	switch op := rng.IntN(100); {
	case op < 28:
		id := s.db.push(key, part)
		ref := Named(part)
		switch rng.IntN(3) {
		case 0:
			ref.ID = id
		case 1:
			ref = PartRef{ID: id} // an event that carried ids only
		}
		src := []Source{SourcePush, SourceCommit, SourceDLQ}[rng.IntN(3)]
		h.Mark(key, ref, src)
		return fmt.Sprintf("push %s/%s %s", key, part, src)
	case op < 55:
		req := Request{Key: key, Group: group, Batch: 1 + rng.IntN(6), Partitions: 1 + rng.IntN(3), AutoAck: rng.IntN(4) == 0}
		co, err := h.Checkout(ctxT(t), req)
		if err != nil {
			t.Fatalf("checkout: %v", err)
		}
		defer co.Release()
		cands := co.Candidates()
		mode := rng.IntN(10)
		if mode == 0 {
			return fmt.Sprintf("pop %s[%s] %d candidates, dropped before the database", key, group, len(cands))
		}
		vs, hl := s.db.popList(key, group, cands, req.Batch, req.Partitions, req.AutoAck)
		*held = append(*held, hl...)
		if mode == 1 {
			return fmt.Sprintf("pop %s[%s] %d candidates, dropped after the database", key, group, len(cands))
		}
		var between []string
		if mode < 6 && depth == 0 {
			// Other requests run between the pop-list and its check-in: a
			// push to a candidate (the race epoch-CAS guards), or anything.
			for n := rng.IntN(3); n >= 0; n-- {
				if len(cands) > 0 && rng.IntN(2) == 0 {
					c := cands[rng.IntN(len(cands))]
					name := c.Name
					if name == "" {
						name = s.db.nameOf(key, c.ID)
					}
					s.db.push(key, name)
					h.Mark(key, Named(name), SourcePush)
					between = append(between, "push "+name)
				} else {
					between = append(between, s.stepDepth(t, rng, held, 1))
				}
			}
		}
		co.CheckIn(vs)
		if len(between) > 0 {
			return fmt.Sprintf("pop %s[%s] %v -> [%v] -> %v", key, group, cands, strings.Join(between, "; "), vs)
		}
		return fmt.Sprintf("pop %s[%s] %v -> %v", key, group, cands, vs)
	case op < 70:
		if len(*held) == 0 {
			return "ack: none held"
		}
		i := rng.IntN(len(*held))
		l := (*held)[i]
		(*held)[i] = (*held)[len(*held)-1]
		*held = (*held)[:len(*held)-1]
		retry := rng.IntN(5) == 0
		out := s.db.ack(l, retry)
		h.Acked(l.key, l.group, PartRef{ID: NoID, UUID: l.uuid}, out)
		return fmt.Sprintf("ack %s[%s] id %d retry=%v -> %+v", l.key, l.group, l.id, retry, out)
	case op < 80:
		// A short pause (the model's pushes are visible at once, as a
		// committed push is to pop_list: the ClaimsSeeMarks runs rely on
		// that).
		s.clock.Advance(time.Millisecond)
		return "clock +1ms"
	case op < 82:
		d := time.Duration(rng.IntN(1500)) * time.Millisecond
		s.clock.Advance(d)
		return fmt.Sprintf("clock +%v", d)
	case op < 83:
		s.clock.Advance(time.Duration(rng.IntN(int(10 * time.Second))))
		return fmt.Sprintf("reseed due: %d", h.ReseedDue(ctxT(t)))
	case op < 87:
		return fmt.Sprintf("sweep: %d", h.Sweep())
	case op < 89:
		tn := tenants[rng.IntN(len(tenants))]
		var keys []string
		for _, k := range s.keys {
			if strings.HasPrefix(k, queuekey.Make(tn, "")) {
				keys = append(keys, k)
			}
		}
		s.db.deleteGroup(keys, group)
		return fmt.Sprintf("group delete %s %s: %d rings", tn, group, h.GroupDeleted(tn, group))
	case op < 91:
		s.db.seekStart(key, group)
		return fmt.Sprintf("seek %s[%s]: %v", key, group, h.Seeked(key, group))
	case op < 96:
		h.ReceiveHints([]Hint{{Key: key, Partition: part, ID: NoID}})
		return fmt.Sprintf("peer hint %s/%s", key, part)
	default:
		return fmt.Sprintf("wake tick: %d", h.WakeTick())
	}
}

// pending is the model's pending count of (key, group) over all
// partitions (a group without a cursor starts at 0).
func (s *sim) pending(key, group string) int {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	q := s.db.queues[key]
	if q == nil {
		return 0
	}
	n := 0
	for _, p := range q.parts {
		pos := 0
		if g := q.groups[group]; g != nil && g[p.id] != nil {
			pos = g[p.id].pos
		}
		n += p.msgs - pos
	}
	return n
}

// drain acks what is held and pops everything with auto-ack, without any
// reseed: it converges only if the hot-list listed every pending
// partition.
func (s *sim) drain(t testing.TB, held []heldLease) {
	t.Helper()
	for _, l := range held {
		s.h.Acked(l.key, l.group, PartRef{ID: NoID, UUID: l.uuid}, s.db.ack(l, false))
	}
	for round := 0; ; round++ {
		left := 0
		for _, k := range s.keys {
			for _, g := range s.groups {
				left += s.pending(k, g)
			}
		}
		if left == 0 {
			return
		}
		if round == 40 {
			t.Fatalf("drain: %d messages still pending after %d rounds without reseed; lost: %v", left, round, lost(t, s.h, s.db))
		}
		s.clock.Advance(1100 * time.Millisecond) // past parks, leases and grace
		for _, k := range s.keys {
			for _, g := range s.groups {
				for s.pending(k, g) > 0 {
					req := Request{Key: k, Group: g, Batch: 1000, Partitions: 64, AutoAck: true}
					co, err := s.h.Checkout(ctxT(t), req)
					if err != nil {
						t.Fatal(err)
					}
					cands := co.Candidates()
					vs, _ := s.db.popList(k, g, cands, req.Batch, req.Partitions, true)
					co.CheckIn(vs)
					if len(cands) == 0 {
						break
					}
				}
			}
		}
	}
}

var modelVariants = []struct {
	name string
	o    Options
}{
	{"narrow", Options{}},
	{"wide", Options{Width: WidthWide}},
	{"narrow-claims-see-marks", Options{ClaimsSeeMarks: true}},
	{"wide-claims-see-marks-2shards", Options{Width: WidthWide, ClaimsSeeMarks: true, Shards: 2}},
	{"narrow-nograce-2shards", Options{EmptyGrace: -1, Shards: 2}},
	{"wide-nograce-1shard", Options{Width: WidthWide, EmptyGrace: -1, Shards: 1}},
}

// TestModelSequential: random operations one at a time; after every step
// no pending partition of an existing ring is IDLE, and the structures are
// consistent; at the end everything drains without a reseed.
func TestModelSequential(t *testing.T) {
	t.Parallel()
	for _, v := range modelVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			var sum Stats
			seeds := uint64(3)
			if raceEnabled {
				seeds = 1
			}
			for seed := uint64(1); seed <= seeds; seed++ {
				s := newSim(t, v.o)
				rng := rand.New(rand.NewPCG(seed, 42))
				var held []heldLease
				var hist []string
				for i := 0; i < 3000; i++ {
					hist = append(hist, s.step(t, rng, &held))
					if l := lost(t, s.h, s.db); len(l) > 0 {
						from := max(0, len(hist)-15)
						t.Fatalf("seed %d step %d: pending but not listed: %v\nlast steps:\n%s", seed, i, l, strings.Join(hist[from:], "\n"))
					}
				}
				s.drain(t, held)
				st := s.h.Stats()
				sum.Took += st.Took
				sum.Empty += st.Empty
				sum.Leased += st.Leased
				sum.Released += st.Released
				sum.Reseeds += st.Reseeds
				sum.Swept += st.Swept
				sum.NoVerdict += st.NoVerdict
			}
			if sum.Took == 0 || sum.Empty == 0 || sum.Leased == 0 || sum.Released == 0 || sum.Reseeds == 0 || sum.NoVerdict == 0 ||
				(sum.Swept == 0 && !raceEnabled) {
				t.Fatalf("the runs did not reach every path: %+v", sum)
			}
		})
	}
}

// TestModelConcurrent: the same operations from 6 goroutines at once
// (run with -race). At checkpoints (all workers paused) every pending
// partition must be listed, in flight or parked, or be rediscovered by one
// reseed; at the end everything drains without a reseed.
func TestModelConcurrent(t *testing.T) {
	t.Parallel()
	for _, v := range modelVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			s := newSim(t, v.o)
			var gate sync.RWMutex
			const workers, steps = 6, 1500
			helds := make([][]heldLease, workers)
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					for i := 0; i < steps; i++ {
						gate.RLock()
						s.step(t, rng, &helds[w])
						gate.RUnlock()
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			checks, healed := 0, 0
			for running := true; running; {
				select {
				case <-done:
					running = false
				case <-time.After(2 * time.Millisecond):
				}
				gate.Lock()
				checks++
				if l := lost(t, s.h, s.db); len(l) > 0 {
					// Allowed only until the next reseed: run one for every ring.
					s.clock.Advance(s.h.o.ReseedInterval + s.h.o.ReseedPhase)
					s.h.ReseedDue(ctxT(t))
					if l2 := lost(t, s.h, s.db); len(l2) > 0 {
						gate.Unlock()
						t.Fatalf("still not listed after a reseed: %v (before: %v)", l2, l)
					}
					healed++
				}
				gate.Unlock()
			}
			var all []heldLease
			for _, hl := range helds {
				all = append(all, hl...)
			}
			s.drain(t, all)
			t.Logf("%d checkpoints, %d healed by a reseed, stats %+v", checks, healed, s.h.Stats())
		})
	}
}
