package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// AckCombiner merges concurrent ack requests into one transaction (the
// acks' group commit, as Combiner is the pushes'): at most Concurrency
// transactions run at once; a request arriving while they all run waits for
// one to finish and then goes out together with every other request that
// queued meanwhile (at most MaxItems acks per transaction, but always at
// least one request whole). The transaction makes ONE pgque.group_ack call
// per (tenant scope, consumer group) of its requests, their acks
// concatenated in arrival order, all sent at once (a pgx batch: one round
// trip, one implicit transaction, one commit and WAL flush). At 1,000
// single-ack requests a second that is a fraction of the commits.
//
// Every request keeps its own answer, exactly as if it had run alone after
// the requests ahead of it: group_ack applies its items in order (each
// cursor as the items before it left it), so a message acked by two
// requests of one call is the later one's noop, and every row maps back by
// its index to the request and item it came from. The tenant stays the
// request's: group_ack takes one tenant per call, so requests of different
// tenants never share a call (they may share the transaction: their queues,
// hence their cursors, are disjoint); a request confined to no tenant
// (AnyTenant) never shares a transaction with a tenant's request of the
// same group (both could name one cursor: the statements' order would
// decide which ack came first).
//
// A transaction that fails in a statement (bad input in one request, a
// deadlock) committed nothing: each of its requests is run again alone, so
// only the faulty one fails; one that timed out or lost its connection
// gives that error to all its requests. A request whose context ends while
// it waits is withdrawn (nothing acked); one whose context ends while its
// transaction runs gets the context's error, and its acks may be applied
// anyway (acking again is a noop then).
//
// A transaction of one (tenant scope, group) statement whose acks are
// group_ack's fast-path shape goes to the queue's ack_direct when its
// route is cached (ackRoutes), and to pgque.group_ack in a transaction of
// its own when ack_direct does not answer (it then wrote nothing).
//
// The statements of a transaction run in (group, tenant) order, each
// group_ack locking its cursors in key order: two combined transactions
// lock in one order and never deadlock each other.
type AckCombiner struct {
	db          BatchQuerier
	concurrency int
	maxItems    int
	timeout     time.Duration

	mu      sync.Mutex
	waiting []*ackCall
	running int

	txns, requests, statements atomic.Int64

	// routes lets a transaction of one (scope, group) whose acks are
	// group_ack's fast path skip pgque.group_ack (ackRoutes).
	routes ackRoutes
}

// BatchQuerier sends a pgx batch (a pool, a connection, a transaction).
type BatchQuerier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// AckPart is one consumer group's acks of a request, in request order.
type AckPart struct {
	Group string // "" = QueueMode
	Acks  []Ack
}

// ackCall is one request waiting for (or riding in) a combined transaction.
type ackCall struct {
	scope Scope
	parts []AckPart
	items int
	res   [][]AckResult
	err   error
	// done is closed when the request's answer is in, or when it is
	// promoted to run the next transaction itself (lead, set under the
	// mutex). nil for a request that runs its transaction at once.
	done chan struct{}
	lead bool
}

// AckCombiner defaults.
const (
	DefaultAckMaxItems = 1000
)

// DefaultAckConcurrency is the number of CPUs, between 2 and 4 (as
// DefaultPushConcurrency: each transaction is a backend busy acking and
// committing; more than the cores combine fewer requests for more CPU).
var DefaultAckConcurrency = DefaultPushConcurrency

// NewAckCombiner makes an AckCombiner running its transactions on db (a
// pool: they run concurrently) with at most concurrency at once (<= 0: the
// default) of at most maxItems acks (<= 0: the default), each bounded by
// timeout.
func NewAckCombiner(db BatchQuerier, concurrency, maxItems int, timeout time.Duration) *AckCombiner {
	if concurrency <= 0 {
		concurrency = DefaultAckConcurrency
	}
	if maxItems <= 0 {
		maxItems = DefaultAckMaxItems
	}
	return &AckCombiner{db: db, concurrency: concurrency, maxItems: maxItems, timeout: timeout}
}

// Ack acknowledges each part's acks in order for its group, confined to
// scope's queues, like AckBatchIn per part, all parts in one transaction
// (all or nothing for database errors), possibly with other requests. The
// answer has one result slice per part, indexed within the part.
//
// The transaction runs on the goroutine of its first request (no hand-off
// to a worker and back), as Combiner's calls do: a request that finds a
// slot free runs at once, with itself first and the requests waiting
// behind it; one that waits is either answered by the transaction that
// took it or promoted, when a transaction ends, to run the next one. So
// each request is woken at most once.
func (c *AckCombiner) Ack(ctx context.Context, scope Scope, parts []AckPart) ([][]AckResult, error) {
	ac := &ackCall{scope: scope}
	for _, p := range parts {
		if len(p.Acks) == 0 {
			continue
		}
		p.Group = GroupOrDefault(p.Group) // the SQL's default: one call for both spellings
		ac.parts = append(ac.parts, p)
		ac.items += len(p.Acks)
	}
	if ac.items == 0 {
		return answers(parts, nil), nil
	}
	ac.res = make([][]AckResult, len(ac.parts))
	c.mu.Lock()
	lead := c.running < c.concurrency
	if lead {
		c.running++
	} else {
		ac.done = make(chan struct{})
		c.waiting = append(c.waiting, ac)
	}
	c.mu.Unlock()
	if !lead {
		select {
		case <-ac.done:
		case <-ctx.Done():
			if err := c.withdraw(ac, ctx.Err()); err != nil {
				return nil, err
			}
			// Taken or promoted meanwhile: its done is closed.
		}
		c.mu.Lock()
		lead = ac.lead
		c.mu.Unlock()
		if !lead {
			if ac.err != nil {
				return nil, ac.err
			}
			return answers(parts, ac.res), nil
		}
		ac.done = nil // closed by the promotion; the leader needs none
	}
	c.lead(ac)
	if ac.err != nil {
		return nil, ac.err
	}
	return answers(parts, ac.res), nil
}

// withdraw takes a request whose context ended (err) back: nothing acked
// when it still waits, or when it was promoted and has not run (its slot
// then goes to the next waiter). nil when its transaction took it: the
// answer is coming (its done is closed or will be).
func (c *AckCombiner) withdraw(ac *ackCall, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, w := range c.waiting {
		if w == ac { // not taken yet: withdrawn, nothing acked
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			return fmt.Errorf("ack: %w (nothing was acknowledged)", err)
		}
	}
	if ac.lead {
		ac.lead = false
		c.handOffLocked()
		return fmt.Errorf("ack: %w (nothing was acknowledged)", err)
	}
	select {
	case <-ac.done:
		return nil
	default:
	}
	return fmt.Errorf("ack: %w (the acks may still be applied: acking again is a noop then)", err)
}

// answers is one result slice per part: an empty part's empty, the others'
// from res (the non-empty parts', in order).
func answers(parts []AckPart, res [][]AckResult) [][]AckResult {
	out := make([][]AckResult, len(parts))
	for i, p := range parts {
		if len(p.Acks) == 0 {
			out[i] = []AckResult{}
			continue
		}
		out[i], res = res[0], res[1:]
	}
	return out
}

// Waiting is the number of ack requests waiting for a transaction slot.
func (c *AckCombiner) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

// AckCombinerStats counts the combiner's work since it started.
type AckCombinerStats struct {
	Transactions int64 // transactions run (commits, or rollbacks)
	Statements   int64 // pgque.group_ack calls in them
	Requests     int64 // requests they answered (a request run again alone counts again)
	Direct       int64 // statements answered by ack_direct instead of pgque.group_ack
}

// Stats is what the combiner did so far.
func (c *AckCombiner) Stats() AckCombinerStats {
	return AckCombinerStats{Transactions: c.txns.Load(), Statements: c.statements.Load(), Requests: c.requests.Load(), Direct: c.routes.acked.Load()}
}

// lead runs one combined transaction holding a slot: ac first, then the
// requests waiting behind it (take), and passes the slot on.
func (c *AckCombiner) lead(ac *ackCall) {
	c.mu.Lock()
	n := c.take(ac)
	batch := make([]*ackCall, 0, n+1)
	batch = append(batch, ac)
	batch = append(batch, c.waiting[:n]...)
	rest := copy(c.waiting, c.waiting[n:])
	clear(c.waiting[rest:])
	c.waiting = c.waiting[:rest]
	c.mu.Unlock()
	c.run(batch)
	c.mu.Lock()
	c.handOffLocked()
	c.mu.Unlock()
}

// handOffLocked passes a finished transaction's slot to the oldest waiting
// request (which then runs the next transaction), or frees it. c.mu is
// held.
func (c *AckCombiner) handOffLocked() {
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

// take says how many of the waiting requests (in arrival order) join
// first's transaction: up to maxItems acks (first whole), stopping before
// a request whose group is in the batch under a scope overlapping its own
// (AnyTenant and a tenant). Called with mu held.
func (c *AckCombiner) take(first *ackCall) int {
	type kinds struct{ any, scoped bool }
	seen := map[string]kinds{}
	items := 0
	add := func(ac *ackCall) bool {
		for _, p := range ac.parts {
			k := seen[p.Group]
			if ac.scope.scoped && k.any || !ac.scope.scoped && k.scoped {
				return false
			}
		}
		for _, p := range ac.parts {
			k := seen[p.Group]
			k.any = k.any || !ac.scope.scoped
			k.scoped = k.scoped || ac.scope.scoped
			seen[p.Group] = k
		}
		items += ac.items
		return true
	}
	add(first)
	n := 0
	for ; n < len(c.waiting); n++ {
		ac := c.waiting[n]
		if items+ac.items > c.maxItems || !add(ac) {
			break
		}
	}
	return n
}

// run makes one transaction for batch and hands every request its
// answer; a failed transaction of several requests is retried request by
// request.
func (c *AckCombiner) run(batch []*ackCall) {
	err := c.call(batch)
	if err != nil && len(batch) > 1 && retryAlone(err) {
		for _, ac := range batch {
			ac.err = c.call([]*ackCall{ac})
			ac.finish()
		}
		return
	}
	for _, ac := range batch {
		ac.err = err
		ac.finish()
	}
}

// finish wakes a request that waits for its answer (the leader, which
// runs the transaction, waits on nothing).
func (ac *ackCall) finish() {
	if ac.done != nil {
		close(ac.done)
	}
}

// ackStmt is one group_ack call of a transaction: one (scope, group), the
// parts of the requests naming it in arrival order.
type ackStmt struct {
	scope Scope
	group string
	parts []ackSlot
	acks  []Ack
}

// ackSlot is where a part's results go: request ac's part i.
type ackSlot struct {
	ac *ackCall
	i  int
}

// call runs batch's requests in one transaction, one group_ack per
// (scope, group), and fills each request's results (on success only).
func (c *AckCombiner) call(batch []*ackCall) error {
	type key struct {
		scope Scope
		group string
	}
	byKey := map[key]*ackStmt{}
	var stmts []*ackStmt
	for _, ac := range batch {
		for i, p := range ac.parts {
			k := key{ac.scope, p.Group}
			st := byKey[k]
			if st == nil {
				st = &ackStmt{scope: ac.scope, group: p.Group}
				byKey[k] = st
				stmts = append(stmts, st)
			}
			st.parts = append(st.parts, ackSlot{ac, i})
			st.acks = append(st.acks, p.Acks...)
		}
	}
	// One lock order for every transaction: (group, tenant), each
	// group_ack then locks its cursors in key order.
	slices.SortFunc(stmts, func(a, b *ackStmt) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(boolInt(a.scope.scoped), boolInt(b.scope.scoped)),
			cmp.Compare(a.scope.tenant, b.scope.tenant))
	})
	c.txns.Add(1)
	c.statements.Add(int64(len(stmts)))
	c.requests.Add(int64(len(batch)))
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// One statement (one scope and group): ack_direct when its route is
	// cached and its acks are the fast path's shape; it writes nothing
	// when it does not answer (then group_ack below does, in a transaction
	// of its own, as if ack_direct had not run). With several statements
	// the transaction stays one (a fallback could not join it).
	var learn *ackRouteKey
	if len(stmts) == 1 {
		st := stmts[0]
		res, ok, err := c.routes.ackDirect(ctx, c.db, st.scope, st.group, st.acks)
		if err != nil {
			return err
		}
		if ok {
			c.fill(stmts, [][]AckResult{res})
			return nil
		}
		if k, shape := ackDirectShape(st.scope, st.group, st.acks); shape {
			learn = &k
		}
	}
	b := &pgx.Batch{}
	for _, st := range stmts {
		b.Queue(groupAckSQL, groupAckArgs(st.scope, st.group, st.acks)...)
	}
	br := c.db.SendBatch(ctx, b)
	results := make([][]AckResult, len(stmts))
	for i, st := range stmts {
		rows, err := br.Query()
		if err == nil {
			results[i], err = scanAcks(rows, len(st.acks))
		}
		if err != nil {
			_ = br.Close()
			return wrap("ack", err)
		}
	}
	if err := br.Close(); err != nil {
		return wrap("ack", err)
	}
	c.fill(stmts, results)
	if learn != nil {
		c.routes.learn(ctx, c.db, *learn)
	}
	return nil
}

// fill hands every request of stmts its results (results[i]: stmts[i]'s).
func (c *AckCombiner) fill(stmts []*ackStmt, results [][]AckResult) {
	for i, st := range stmts {
		off := 0
		for _, s := range st.parts {
			n := len(s.ac.parts[s.i].Acks)
			res := results[i][off : off+n : off+n]
			for j := range res {
				res[j].Index -= off
			}
			s.ac.res[s.i] = res
			off += n
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
