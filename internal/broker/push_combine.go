package broker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Combiner merges concurrent pushes into one pgque.push call (one
// transaction, one commit and WAL flush, one plan of its statements for
// all of them): the broker's group commit. A push that arrives while
// Concurrency calls are already running waits for one of them to finish
// and then goes out together with every other push that queued meanwhile
// (at most MaxItems items per call, but always at least one push whole).
// At low rates a push runs alone at once; at 1,000 single-item pushes a
// second it shares its call and commit with whatever arrived during the
// previous one, so the database does a fraction of the per-call work.
// A call of one queue's items without transactionId whose route is
// cached goes to the queue's push_direct instead of pgque.push (one
// INSERT; pushRoutes), falling back to pgque.push when the route is stale.
//
// Every push keeps its own outcome: results are indexed within the push,
// and when a combined call fails in a statement (bad input in one push, a
// deadlock) nothing of it was committed and each of its pushes is run again
// alone, so only the faulty one fails; a call that timed out or lost its
// connection gives its error to all its pushes (retrying each alone would
// queue one timeout after the other). Within one combined call a
// transactionId repeated by a later push is that push's duplicate, exactly
// as if the two had run one after the other.
//
// A push whose context ends while it waits is withdrawn (nothing stored);
// one whose context ends while its call runs gets the context's error, but
// the call goes on for the others: its items may be committed anyway (the
// client, given no answer, may push again; with a transactionId that is a
// duplicate).
type Combiner struct {
	db          Querier
	concurrency int
	maxItems    int
	timeout     time.Duration

	notify Notify
	// routes lets a call of one queue's items without transactionId skip
	// pgque.push (pushRoutes).
	routes pushRoutes

	mu      sync.Mutex
	waiting []*pushCall
	running int
}

// pushCall is one push waiting for (or riding in) a combined call.
type pushCall struct {
	items []Item
	res   []PushResult
	err   error
	// done is closed when the push's results are in, or when it is
	// promoted to run the next call itself (lead, set under the mutex).
	done chan struct{}
	lead bool
}

// Combiner defaults.
const (
	DefaultPushMaxItems = 1000
)

// DefaultPushConcurrency is the number of CPUs, between 2 and 4: each
// concurrent call is a backend busy inserting and committing, and calls
// beyond the cores combine fewer pushes for more CPU (on 2 cores, at 1,000
// one-message pushes/s, 4 calls gave push->pop p50 17 ms / p99 342-670 ms
// in bench/broker's latency-on cell, 2 calls p50 12-14 ms / p99 108-227 ms).
var DefaultPushConcurrency = min(4, max(2, runtime.NumCPU()))

// NewCombiner makes a Combiner running its calls on db (a pool: calls run
// concurrently) with at most concurrency calls at once (<= 0: the default)
// of at most maxItems items (<= 0: the default), each bounded by timeout.
func NewCombiner(db Querier, concurrency, maxItems int, timeout time.Duration) *Combiner {
	if concurrency <= 0 {
		concurrency = DefaultPushConcurrency
	}
	if maxItems <= 0 {
		maxItems = DefaultPushMaxItems
	}
	return &Combiner{db: db, concurrency: concurrency, maxItems: maxItems, timeout: timeout}
}

// SetNotify makes every call send n in its transaction (PushNotify). Call
// it before the first Push.
func (c *Combiner) SetNotify(n Notify) { c.notify = n }

// Push stores items like Push (all or nothing for this push), possibly in
// one call with other pushes.
//
// The call runs on the goroutine of its first push (no hand-off to a
// worker and back): a push that finds a call slot free runs at once, with
// itself first and the pushes that wait behind it; one that waits is
// either answered by the call that took it or promoted, when a call ends,
// to run the next one. Once its call is done a push passes the slot to
// the oldest waiting push, so calls keep the arrival order and each push
// is woken at most once.
func (c *Combiner) Push(ctx context.Context, items []Item) ([]PushResult, error) {
	if len(items) == 0 {
		return []PushResult{}, nil
	}
	pc := &pushCall{items: items}
	c.mu.Lock()
	lead := c.running < c.concurrency
	if lead {
		c.running++
	} else {
		pc.done = make(chan struct{})
		c.waiting = append(c.waiting, pc)
	}
	c.mu.Unlock()
	if !lead {
		select {
		case <-pc.done:
		case <-ctx.Done():
			if err := c.withdraw(pc, ctx.Err()); err != nil {
				return nil, err
			}
			// Taken or promoted meanwhile: its done is closed.
		}
		c.mu.Lock()
		lead = pc.lead
		c.mu.Unlock()
		if !lead {
			return pc.res, pc.err
		}
		pc.done = nil // closed by the promotion; the leader needs none
	}
	c.lead(pc)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("push: %w (the push may still be stored: push again with a transactionId to be safe)", err)
	}
	return pc.res, pc.err
}

// withdraw takes a push whose context ended (err) back: nothing stored
// when it still waits, or when it was promoted and has not run (its slot
// then goes to the next waiter). nil when its call took it: the results
// are coming (its done is closed or will be).
func (c *Combiner) withdraw(pc *pushCall, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, w := range c.waiting {
		if w == pc { // not taken yet: withdrawn, nothing stored
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			return fmt.Errorf("push: %w (nothing was stored)", err)
		}
	}
	if pc.lead {
		pc.lead = false
		c.handOffLocked()
		return fmt.Errorf("push: %w (nothing was stored)", err)
	}
	select {
	case <-pc.done:
		return nil
	default:
	}
	return fmt.Errorf("push: %w (the push may still be stored: push again with a transactionId to be safe)", err)
}

// Waiting is the number of pushes waiting for a call slot right now.
func (c *Combiner) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

// lead runs one combined call holding a slot: pc first, then the pushes
// waiting behind it (at most maxItems items, pc whole), and passes the
// slot on.
func (c *Combiner) lead(pc *pushCall) {
	c.mu.Lock()
	n, items := 0, len(pc.items)
	for n < len(c.waiting) && items+len(c.waiting[n].items) <= c.maxItems {
		items += len(c.waiting[n].items)
		n++
	}
	batch := make([]*pushCall, 0, n+1)
	batch = append(batch, pc)
	batch = append(batch, c.waiting[:n]...)
	rest := copy(c.waiting, c.waiting[n:])
	clear(c.waiting[rest:])
	c.waiting = c.waiting[:rest]
	c.mu.Unlock()
	c.run(batch, items)
	c.mu.Lock()
	c.handOffLocked()
	c.mu.Unlock()
}

// handOffLocked passes a finished call's slot to the oldest waiting push
// (which then runs the next call), or frees it. c.mu is held.
func (c *Combiner) handOffLocked() {
	if len(c.waiting) == 0 {
		c.running--
		return
	}
	next := c.waiting[0]
	rest := copy(c.waiting, c.waiting[1:])
	c.waiting[rest] = nil
	c.waiting = c.waiting[:rest]
	next.lead = true
	close(next.done)
}

// run makes one call for batch (items in all) and hands every push its
// results; a failed call of several pushes is retried push by push.
func (c *Combiner) run(batch []*pushCall, items int) {
	all := batch[0].items
	if len(batch) > 1 {
		all = make([]Item, 0, items)
		for _, pc := range batch {
			all = append(all, pc.items...)
		}
	}
	res, err := c.call(all)
	if err != nil && len(batch) > 1 && retryAlone(err) {
		for _, pc := range batch {
			pc.res, pc.err = c.call(pc.items)
			pc.finish()
		}
		return
	}
	off := 0
	for _, pc := range batch {
		if err != nil {
			pc.err = err
		} else {
			pc.res = res[off : off+len(pc.items) : off+len(pc.items)]
			for i := range pc.res {
				pc.res[i].Index -= off
			}
		}
		off += len(pc.items)
		pc.finish()
	}
}

// finish wakes a push that waits for its results (the leader, which runs
// the call, waits on nothing).
func (pc *pushCall) finish() {
	if pc.done != nil {
		close(pc.done)
	}
}

// retryAlone says whether a failed combined call's pushes are worth
// running one by one: the statement failed (bad input in one push, a
// deadlock, a limit), not the connection or the clock - after a timeout or
// a lost connection each push alone would most likely fail the same way,
// one timeout after the other, so they all get the error at once.
func retryAlone(err error) bool {
	if errors.Is(err, ErrInvalidInput) || errors.Is(err, ErrNotFound) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code[:2] {
	case "08", "53", "57", "58": // connection, resources, cancel / shutdown, system
		return false
	}
	return true
}

func (c *Combiner) call(items []Item) ([]PushResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	res, ok, err := c.routes.pushDirect(ctx, c.db, items, c.notify)
	if !ok && err == nil {
		res, err = PushNotify(ctx, c.db, items, c.notify)
		if err == nil {
			c.routes.learn(ctx, c.db, items)
		}
	}
	if err == nil && len(res) != len(items) {
		return nil, fmt.Errorf("push: %d results for %d items (a bug: report it)", len(res), len(items))
	}
	return res, err
}
