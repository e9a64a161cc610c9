package hotlist

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is the injectable clock of the tests.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func quietLogger() *slog.Logger              { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func ctxT(t testing.TB) context.Context      { return t.Context() }

// modelDB is the reference model of the database side: per queue, per
// partition a message count; per (group, partition) a cursor and a lease.
// "Pending work" of (group, partition) is msgs > pos.
type modelDB struct {
	mu     sync.Mutex
	clock  *fakeClock
	lease  time.Duration
	queues map[string]*mQueue
	tok    int
}

type mQueue struct {
	parts  []*mPart // by creation order
	byName map[string]*mPart
	byID   map[int32]*mPart
	groups map[string]map[int32]*mCursor
}

type mPart struct {
	id   int32
	name string
	uuid string
	msgs int
}

type mCursor struct {
	pos        int
	leaseEnd   int
	leaseUntil time.Time
	leaseTok   int
}

func newModelDB(c *fakeClock) *modelDB {
	return &modelDB{clock: c, lease: 3 * time.Second, queues: map[string]*mQueue{}}
}

func (db *modelDB) queue(key string) *mQueue {
	q := db.queues[key]
	if q == nil {
		q = &mQueue{byName: map[string]*mPart{}, byID: map[int32]*mPart{}, groups: map[string]map[int32]*mCursor{}}
		db.queues[key] = q
	}
	return q
}

// push stores one message; it returns the partition's id.
func (db *modelDB) push(key, name string) int32 {
	db.mu.Lock()
	defer db.mu.Unlock()
	q := db.queue(key)
	p := q.byName[name]
	if p == nil {
		// ids deliberately differ from the hot-list's interning order
		id := int32(7 + 3*len(q.parts))
		p = &mPart{id: id, name: name, uuid: fmt.Sprintf("uuid-%s-%d", key, id)}
		q.parts = append(q.parts, p)
		q.byName[name] = p
		q.byID[id] = p
	}
	p.msgs++
	return p.id
}

func (db *modelDB) nameOf(key string, id int32) string {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.queue(key).byID[id].name
}

func (db *modelDB) cursor(q *mQueue, group string, id int32) *mCursor {
	g := q.groups[group]
	if g == nil {
		g = map[int32]*mCursor{}
		q.groups[group] = g
	}
	c := g[id]
	if c == nil {
		c = &mCursor{}
		g[id] = c
	}
	return c
}

type heldLease struct {
	key, group string
	id         int32
	uuid       string
	tok        int
}

// popList is the model of the set-based pop-list.
func (db *modelDB) popList(key, group string, cands []Candidate, batch, maxParts int, auto bool) ([]Verdict, []heldLease) {
	db.mu.Lock()
	defer db.mu.Unlock()
	now := db.clock.Now()
	q := db.queue(key)
	var vs []Verdict
	var held []heldLease
	budget, took := batch, 0
	for _, c := range cands {
		if budget == 0 || took == maxParts {
			break
		}
		var p *mPart
		if c.ID != NoID {
			p = q.byID[c.ID]
		} else {
			p = q.byName[c.Name]
		}
		if p == nil {
			continue // unknown partition: no verdict
		}
		cur := db.cursor(q, group, p.id)
		v := Verdict{PartitionID: p.id, PartitionUUID: p.uuid, Partition: p.name}
		if cur.leaseEnd > 0 && now.Before(cur.leaseUntil) {
			v.Kind, v.Until = VerdictLeased, cur.leaseUntil
			vs = append(vs, v)
			continue
		}
		cur.leaseEnd = 0
		if p.msgs > cur.pos {
			n := min(p.msgs-cur.pos, budget)
			budget -= n
			took++
			v.Kind = VerdictTook
			v.Drained = cur.pos+n == p.msgs
			if auto {
				cur.pos += n
			} else {
				db.tok++
				cur.leaseEnd, cur.leaseUntil, cur.leaseTok = cur.pos+n, now.Add(db.lease), db.tok
				v.Until = cur.leaseUntil
				held = append(held, heldLease{key, group, p.id, p.uuid, db.tok})
			}
		} else {
			v.Kind = VerdictEmpty
		}
		vs = append(vs, v)
	}
	return vs, held
}

// ack completes (or, with retry, gives back) a held lease.
func (db *modelDB) ack(l heldLease, retry bool) AckOutcome {
	db.mu.Lock()
	defer db.mu.Unlock()
	q := db.queue(l.key)
	g := q.groups[l.group]
	if g == nil {
		return AckOutcome{}
	}
	cur := g[l.id]
	if cur == nil || cur.leaseEnd == 0 || cur.leaseTok != l.tok || !db.clock.Now().Before(cur.leaseUntil) {
		return AckOutcome{} // invalid or expired lease
	}
	if !retry {
		cur.pos = cur.leaseEnd
	}
	cur.leaseEnd = 0
	return AckOutcome{LeaseReleased: true, Redeliver: retry}
}

// reseedPage: partitions with pending work or a live lease, id > after.
func (db *modelDB) ReseedPage(_ context.Context, key, group string, after int32, limit int) ([]ReseedRow, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	now := db.clock.Now()
	q := db.queue(key)
	var rows []ReseedRow
	for _, p := range q.parts {
		if p.id <= after {
			continue
		}
		cur := db.cursor(q, group, p.id)
		live := cur.leaseEnd > 0 && now.Before(cur.leaseUntil)
		if p.msgs > cur.pos || live {
			r := ReseedRow{ID: p.id, UUID: p.uuid, Name: p.name}
			if live {
				r.LeasedUntil = cur.leaseUntil
			}
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b ReseedRow) int { return int(a.ID - b.ID) })
	if len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, nil
}

// deleteGroup drops a group's cursors on the queues of keys; a later pop
// starts it again at position 0 (pending work without any push).
func (db *modelDB) deleteGroup(keys []string, group string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, k := range keys {
		if q := db.queues[k]; q != nil {
			delete(q.groups, group)
		}
	}
}

// seekStart moves a group's unleased cursors of a queue back to 0.
func (db *modelDB) seekStart(key, group string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	q := db.queues[key]
	if q == nil {
		return
	}
	for _, c := range q.groups[group] {
		if c.leaseEnd == 0 {
			c.pos = 0
		}
	}
}

// lost lists (key, group, partition) with pending work whose entry in an
// existing ring of the hot-list is IDLE or missing: the defect the
// hot-list must never have (beyond the next reseed). It also checks the
// structures: list links, counts, a heap entry for every WHEEL slot.
func lost(t testing.TB, h *HotList, db *modelDB) []string {
	t.Helper()
	db.mu.Lock()
	defer db.mu.Unlock()
	var out []string
	for _, q := range h.snapshot() {
		checkStructures(t, q)
		mq := db.queues[q.key]
		if mq == nil {
			continue
		}
		q.mu.RLock()
		for group, r := range q.rings {
			if !r.seeded.Load() {
				continue
			}
			for _, p := range mq.parts {
				pos := 0
				if g := mq.groups[group]; g != nil && g[p.id] != nil {
					pos = g[p.id].pos
				}
				if p.msgs <= pos {
					continue
				}
				st := stIdle
				for i, pi := range q.parts { // every entry of the partition (by name, by id)
					if pi.name != p.name && pi.id != p.id {
						continue
					}
					s, sp := r.locate(uint32(i))
					s.mu.Lock()
					if int(sp) < len(s.slots) && s.slots[sp].state != stIdle {
						st = s.slots[sp].state
					}
					s.mu.Unlock()
				}
				if st == stIdle {
					out = append(out, fmt.Sprintf("%s[%s]/%s", printableKey(q.key), group, p.name))
				}
			}
		}
		q.mu.RUnlock()
	}
	slices.Sort(out)
	return out
}

func checkStructures(t testing.TB, q *queue) {
	t.Helper()
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.list) != len(q.rings) {
		t.Fatalf("%s: list %d rings %d", q.key, len(q.list), len(q.rings))
	}
	for _, r := range q.list {
		for si := range r.subs {
			s := &r.subs[si]
			s.mu.Lock()
			var cnt [4]int
			for i := range s.slots {
				cnt[s.slots[i].state]++
			}
			n, prev := 0, int32(-1)
			for p := s.head; p >= 0; p = s.slots[p].next {
				if s.slots[p].state != stReady || s.slots[p].prev != prev {
					t.Fatalf("%s: ready list broken at %d", q.key, p)
				}
				prev = p
				n++
			}
			if n != cnt[stReady] || n != s.nReady || s.tail != prev || cnt[stWheel] != s.nWheel || cnt[stInflight] != s.nInflight {
				t.Fatalf("%s: counts list=%d states=%v n=%d/%d/%d", q.key, n, cnt, s.nReady, s.nWheel, s.nInflight)
			}
			live := map[int32]bool{}
			for _, e := range s.wheel {
				if !s.stale(e) {
					live[e.pos] = true
				}
			}
			for i := range s.slots {
				if s.slots[i].state == stWheel && !live[int32(i)] {
					t.Fatalf("%s: WHEEL slot %d has no wheel entry", q.key, i)
				}
			}
			s.mu.Unlock()
		}
	}
}
