// Package wake holds the long-poll wake gates of the broker: a parked pop
// waits on the gate of its queue (no database connection held) and a push
// to that queue, local or announced by a peer broker, opens it.
//
// Gates are keyed by queuekey.Make(tenant, queue), the same bytes the
// hot-list uses for its per-queue state.
package wake

import "sync"

// Gates is a set of wake gates. The zero value is not usable; use New.
type Gates struct {
	mu    sync.Mutex
	gates map[string]*gate
}

type gate struct {
	ch      chan struct{}
	waiters int
	// rounds are the shared re-checks of this gate's waiters (Check),
	// by question; they die with the gate (a Signal makes them stale).
	rounds map[string]*round
}

// New returns an empty set of gates.
func New() *Gates { return &Gates{gates: map[string]*gate{}} }

// Wait returns a channel that is closed by the next Signal(key), and a
// release function the waiter must call when it stops waiting. Take the
// channel BEFORE checking the database, so a signal that arrives between
// the check and the wait is not lost.
func (g *Gates) Wait(key string) (<-chan struct{}, func()) {
	t := g.Park(key)
	return t.C, t.Release
}

// Signal wakes every waiter of key; it reports whether there was one.
func (g *Gates) Signal(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt := g.gates[key]
	if gt == nil {
		return false
	}
	close(gt.ch)
	delete(g.gates, key)
	return true
}

// Waiting returns how many waiters are parked on any gate.
func (g *Gates) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, gt := range g.gates {
		n += gt.waiters
	}
	return n
}
