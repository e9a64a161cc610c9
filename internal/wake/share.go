package wake

import (
	"context"
	"time"
)

// Outcome is what a parked pop's re-check found.
type Outcome int

const (
	// Found: the check took messages or failed. Its result belongs to the
	// waiter that ran it, so the waiters sharing it check for themselves.
	Found Outcome = iota
	// Empty: nothing to take.
	Empty
	// Missing: the queue does not exist (empty too, for a pop).
	Missing
)

// Ticket is one waiter's hold on the gate of a key: C is closed by the
// next Signal of the key. Release it when it stops waiting.
type Ticket struct {
	C   <-chan struct{}
	g   *Gates
	key string
	gt  *gate
}

// flight is one re-check, running or done.
type flight struct {
	start time.Time
	done  chan struct{}
	out   Outcome
}

// round is the re-checks of one question (sub) on one gate.
type round struct {
	running *flight // the check waiters join, nil when none runs
	last    *flight // the latest-started check that ended
}

// Park takes the current gate of key. Take it BEFORE checking the
// database, so that a signal arriving between the check and the wait is
// not lost.
func (g *Gates) Park(key string) *Ticket {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt := g.gates[key]
	if gt == nil {
		gt = &gate{ch: make(chan struct{})}
		g.gates[key] = gt
	}
	gt.waiters++
	return &Ticket{C: gt.ch, g: g, key: key, gt: gt}
}

// Release ends the ticket's wait (idempotent).
func (t *Ticket) Release() {
	g := t.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.gt == nil {
		return
	}
	if cur := g.gates[t.key]; cur == t.gt {
		cur.waiters--
		if cur.waiters == 0 {
			delete(g.gates, t.key)
		}
	}
	t.gt = nil
}

// Check answers a parked waiter's re-check, sharing it with the other
// waiters of the same gate that ask the same question (sub: the pop's
// queue, group, partition or labels). since is the start of the check
// that last answered this waiter (or when it was woken): a check of this
// gate (so no Signal came since it started) and sub that started after
// since and ended Empty or Missing answers it without running check; one
// still running is waited for (until ctx ends). Otherwise - no such check,
// or the shared one Found something (its messages are its waiter's) -
// check runs for this waiter, and the waiters arriving meanwhile share
// it. Check returns the outcome, the start of the check that answered,
// and whether check ran (only then does the caller hold its result).
//
// So parked pops cost one database check per (gate, sub) and backoff
// period, however many wait. A ticket already signalled (C closed) gets
// no shared answer: its waiter checks anew.
func (t *Ticket) Check(ctx context.Context, sub string, since time.Time, check func() Outcome) (Outcome, time.Time, bool) {
	g := t.g
	g.mu.Lock()
	gt := t.gt
	shareable := gt != nil && g.gates[t.key] == gt
	var rd *round
	if shareable {
		if gt.rounds == nil {
			gt.rounds = map[string]*round{}
		}
		if rd = gt.rounds[sub]; rd == nil {
			rd = &round{}
			gt.rounds[sub] = rd
		}
		if l := rd.last; l != nil && l.start.After(since) && l.out != Found {
			g.mu.Unlock()
			return l.out, l.start, false
		}
		if f := rd.running; f != nil && f.start.After(since) {
			g.mu.Unlock()
			select {
			case <-f.done:
				if f.out != Found {
					return f.out, f.start, false
				}
			case <-ctx.Done():
				return Empty, since, false
			}
			// It found messages (there may be more) or failed: check alone.
			start := time.Now()
			return check(), start, true
		}
	}
	f := &flight{start: time.Now(), done: make(chan struct{})}
	if rd != nil {
		rd.running = f
	}
	g.mu.Unlock()
	f.out = Found // if check panics, joiners check for themselves
	defer func() {
		g.mu.Lock()
		if rd != nil {
			if rd.running == f {
				rd.running = nil
			}
			if rd.last == nil || f.start.After(rd.last.start) {
				rd.last = f
			}
		}
		close(f.done)
		g.mu.Unlock()
	}()
	out := check()
	f.out = out
	return out, f.start, true
}
