package broker_test

// TestGroupConcurrencyRandomized: the consumer groups' contract under
// randomized concurrent load. Producers push 1..20 items over 8 partitions
// per transaction, in READ COMMITTED and REPEATABLE READ, some holding the
// transaction open across claims, ticks and forced rotations, some rolling
// back, some with transactionIds (repeated ones must be stored once).
// Three groups (queue mode among them), four consumers each, claim through
// two independent pools (two "brokers") with pop_list, pop_any and
// pop_partition, random batch sizes and 1 s leases, and ack in order or
// out of order, in one call or in chunks; some crash (never ack, or ack
// only events ahead of an unacked one), some ack after their lease expired,
// some extend their lease first, some retry or fail an event, some repeat
// an ack or roll an ack back. A ticker ticks every ~10 ms; event tables and
// the metadata tables rotate constantly.
//
// Asserted, per group, after a drain:
//   - every committed message is resolved (acked completed under a live
//     lease, the position moving over it) exactly once; nothing rolled back
//     and no duplicate is ever delivered;
//   - a message comes again only after the lease that had it ended
//     abnormally: it expired before the new claim, or an ack under it
//     released it for a retry (counted separately);
//   - an ack after expiry or without the lease id of a redelivered batch is
//     never applied; an ack within a (possibly extended) live lease is; an
//     ack repeated is never applied twice;
//   - order, per partition, on the sequence in which the group resolved its
//     messages: (1) the events of one producer transaction are contiguous
//     and in push order: a transaction is visible in a snapshot all at once,
//     so all its events fall in one range, and a range is served in
//     (ev_txid, ev_id) order; (2) when transaction A's COMMIT returned
//     before transaction B pushed its first event, A's events come before
//     B's: B's transaction id was assigned after A committed, so every
//     snapshot that sees B sees A (A's range is not after B's) and, within
//     one range, A's smaller id sorts first. This is commit order at
//     snapshot granularity; it holds whatever closes ranges (ticks or
//     claim-time snapshots), and the test assumes nothing about when a
//     message becomes claimable;
//   - with transactionIds, one message per (partition, id) is queued among
//     the committed pushes, every duplicate names it.
//
// The order of the claims of one cursor is read from a sequence drawn in
// the claiming transaction after the claim: a claim of a cursor locks its
// row after the previous claim of it committed, so the draws are in claim
// order. The seed is logged; PGQUE_TEST_SEED=<n> replays one (the
// interleaving is the scheduler's, so a replay repeats the choices, not the
// timing). Skipped with -short.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/broker"
)

const (
	gcProduce   = 15 * time.Second
	gcDrainFor  = 60 * time.Second
	gcParts     = 8
	gcLease     = 1 // seconds
	gcProducers = 4
	gcConsumers = 4 // per group
	gcMaxFails  = 2 // failed acks per message and group (retryLimit is 3: never dead-lettered)
)

var gcGroups = []string{broker.QueueMode, "g1", "g2"}

// gcTx is one producer transaction.
type gcTx struct {
	id        int
	how       string
	txid      int64
	pushStart time.Time // before its first push (its transaction id is assigned after)
	commitEnd time.Time // after COMMIT returned
	committed bool
}

// gcItem is one pushed item.
type gcItem struct {
	key, part, txn string // txn: the given transactionId
	tx             *gcTx
	idx            int // push order inside the transaction
	status         string
	msgID          string
}

func (it *gcItem) queued() bool { return it.tx.committed && it.status == broker.StatusQueued }

// gcAck is one ack item's call and outcome.
type gcAck struct {
	status     string
	leaseGiven bool
	repeat     bool
	start, end time.Time
	res        broker.AckResult
}

// gcClaim is one partition's part of one committed claim.
type gcClaim struct {
	order            int64
	group, part      string
	consumer         string
	lease            string // "" with auto-ack
	auto             bool
	popStart, popEnd time.Time
	until            time.Time // lease expiry, extended when every partition of the lease was
	keys             []string
	msgs             []broker.Message
	acks             map[string][]gcAck
	redeliverAt      time.Time // start of the first ack call that released the lease for a retry
}

func (c *gcClaim) String() string {
	return fmt.Sprintf("claim #%d by %s (lease %.8s, popped %s-%s, until %s)", c.order, c.consumer, c.lease,
		c.popStart.Format("15:04:05.000"), c.popEnd.Format("15:04:05.000"), c.until.Format("15:04:05.000"))
}

type gcState struct {
	mu       sync.Mutex
	txs      []*gcTx
	items    map[string]*gcItem
	claims   map[string]map[string][]*gcClaim // group -> partition -> claims
	fails    map[string]int                   // group/key -> failed acks applied
	problems []string
	stats    map[string]int
}

func (s *gcState) problem(format string, args ...any) {
	s.mu.Lock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *gcState) count(what string, n int) {
	s.mu.Lock()
	s.stats[what] += n
	s.mu.Unlock()
}

func gcRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01" || pgErr.Code == "55P03")
}

func gcSleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func gcPool(t *testing.T, dsn string, n int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = n
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestGroupConcurrencyRandomized(t *testing.T) {
	if testing.Short() {
		t.Skip("randomized load for ~20 s")
	}
	e := setup(t)
	seed := time.Now().UnixNano()
	if v := os.Getenv("PGQUE_TEST_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("PGQUE_TEST_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (replay: PGQUE_TEST_SEED=%d)", seed, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d (replay: PGQUE_TEST_SEED=%d)", seed, seed)
		}
	})
	master := rand.New(rand.NewSource(seed))

	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_queue_config('q', 'rotation_period', '0')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.exec(`SELECT pgque.set_setting('meta_rotation_period_ms', '100')`)
	e.exec(`SELECT pgque.set_setting('meta_rotation_max_pages', '1')`)
	e.exec(`CREATE SEQUENCE public.gc_claim_order`)
	brokers := []*pgxpool.Pool{gcPool(t, e.dsn, 12), gcPool(t, e.dsn, 12)}
	admin := gcPool(t, e.dsn, 4)

	st := &gcState{items: map[string]*gcItem{}, claims: map[string]map[string][]*gcClaim{},
		fails: map[string]int{}, stats: map[string]int{}}
	for _, g := range gcGroups {
		st.claims[g] = map[string][]*gcClaim{}
	}
	parts := make([]string, gcParts)
	for i := range parts {
		parts[i] = fmt.Sprintf("p%d", i)
	}

	// Every group subscribes ('all') before anything rotates, and one
	// committed transaction creates the partitions.
	for _, g := range gcGroups {
		if _, err := broker.PopAny(ctxT(t), e.conn, broker.Pop{Queue: "q", Group: g, Batch: 1, LeaseSeconds: gcLease, SubscriptionMode: "all"}); err != nil {
			t.Fatalf("subscribing %s: %v", g, err)
		}
	}
	{
		tx := &gcTx{id: 0, how: "setup", pushStart: time.Now()}
		var items []broker.Item
		for i, p := range parts {
			key := fmt.Sprintf("s-%d", i)
			items = append(items, broker.Item{Queue: "q", Partition: p, Payload: gcPayload(key)})
			st.items[key] = &gcItem{key: key, part: p, tx: tx, idx: i}
		}
		res, err := broker.Push(ctxT(t), e.conn, items)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			it := st.items[fmt.Sprintf("s-%d", i)]
			it.status, it.msgID, tx.txid = r.Status, r.MessageID, r.Txid
		}
		tx.committed, tx.commitEnd = true, time.Now()
		st.txs = append(st.txs, tx)
	}
	var partIDs []int32
	rows, err := e.conn.Query(ctxT(t), `SELECT p.part_id FROM pgque.partition p JOIN pgque.queue q ON q.queue_id = p.part_queue
	                                     WHERE q.queue_name = 'q' AND p.part_name LIKE 'p%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if partIDs, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil || len(partIDs) != gcParts {
		t.Fatalf("partition ids %v: %v", partIDs, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	produceCtx, stopProducing := context.WithTimeout(ctx, gcProduce)
	defer stopProducing()
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	bgCtx, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	errs := make(chan error, 100)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	var bg, prod, cons sync.WaitGroup
	var draining atomic.Bool

	// The ticker: the engine's ticker every ~10 ms, now and then a forced
	// broker tick. Nothing below waits for a tick.
	bg.Add(1)
	go func() {
		defer bg.Done()
		for i := 0; bgCtx.Err() == nil; i++ {
			q := `SELECT pgque.ticker()`
			if i%3 == 0 {
				q = `SELECT pgque.broker_tick('q')`
			}
			if _, err := admin.Exec(bgCtx, q); err != nil && bgCtx.Err() == nil && !gcRetryable(err) {
				report(fmt.Errorf("ticker: %s: %w", q, err))
				return
			}
			gcSleep(bgCtx, 10*time.Millisecond)
		}
	}()
	// Rotation, forced between claims: event tables (step 1 and step 2 in
	// separate transactions), ticks and subscriptions, group cursors and
	// dedup.
	var switches atomic.Int64
	bg.Add(1)
	go func(rng *rand.Rand) {
		defer bg.Done()
		conn, err := admin.Acquire(bgCtx)
		if err != nil {
			return
		}
		defer conn.Release()
		last := int64(-1)
		for bgCtx.Err() == nil {
			for _, q := range []string{`SELECT pgque.maint_rotate_tables_step1('q')`, `SELECT pgque.maint_rotate_tables_step2()`,
				`SELECT pgque.rotate_metadata()`, `SELECT pgque.group_rotate()`} {
				if _, err := conn.Exec(bgCtx, q); err != nil && bgCtx.Err() == nil && !gcRetryable(err) {
					report(fmt.Errorf("%s: %w", q, err))
					return
				}
			}
			var cur int64
			if err := conn.QueryRow(bgCtx, `SELECT queue_cur_table FROM pgque.queue WHERE queue_name = 'q'`).Scan(&cur); err == nil {
				if last >= 0 && cur != last {
					switches.Add(1)
				}
				last = cur
			}
			gcSleep(bgCtx, time.Duration(50+rng.Intn(150))*time.Millisecond)
		}
	}(rand.New(rand.NewSource(master.Int63())))

	// Producers.
	var txSeq atomic.Int64
	for p := 0; p < gcProducers; p++ {
		prod.Add(1)
		go func(p int, rng *rand.Rand) {
			defer prod.Done()
			conn, err := brokers[p%2].Acquire(ctx)
			if err != nil {
				report(err)
				return
			}
			defer conn.Release()
			var mine []string // this producer's committed transactionIds
			for n := 0; produceCtx.Err() == nil; n++ {
				if err := gcProduceTx(ctx, conn.Conn(), rng, st, p, n, int(txSeq.Add(1)), parts, &mine); err != nil {
					report(fmt.Errorf("producer %d: %w", p, err))
					return
				}
				gcSleep(produceCtx, time.Duration(30+rng.Intn(150))*time.Millisecond)
			}
		}(p, rand.New(rand.NewSource(master.Int63())))
	}

	// Consumers.
	for _, g := range gcGroups {
		for w := 0; w < gcConsumers; w++ {
			cons.Add(1)
			c := &gcConsumer{name: fmt.Sprintf("%s/%d", g, w), group: g, st: st, brokers: brokers, partIDs: partIDs, parts: parts,
				rng: rand.New(rand.NewSource(master.Int63())), draining: &draining}
			go func() {
				defer cons.Done()
				for consumeCtx.Err() == nil {
					if err := c.step(consumeCtx); err != nil {
						if consumeCtx.Err() == nil {
							report(fmt.Errorf("consumer %s: %w", c.name, err))
						}
						return
					}
				}
			}()
		}
	}

	prod.Wait()
	// Drain: until no group has anything pending, no lease is live and no
	// consumer errored.
	draining.Store(true)
	drainStart := time.Now()
	deadline := drainStart.Add(gcDrainFor)
	drained := false
	var missing, leases int64
	for time.Now().Before(deadline) && len(errs) == 0 {
		st.mu.Lock()
		missing = int64(st.unresolved())
		st.mu.Unlock()
		if missing == 0 {
			if err := admin.QueryRow(ctx, `SELECT count(*) FROM pgque.group_cursor WHERE gc_lease_until > now()`).Scan(&leases); err != nil {
				t.Fatal(err)
			}
			if leases == 0 {
				drained = true
				break
			}
		}
		gcSleep(ctx, 200*time.Millisecond)
	}
	if drained {
		t.Logf("drained in %v", time.Since(drainStart).Round(time.Millisecond))
	}
	stopConsuming()
	cons.Wait()
	// Nothing is left for any group, whichever broker asks.
	for _, g := range gcGroups {
		for _, pool := range brokers {
			r, err := broker.PopList(ctx, pool, broker.Pop{Queue: "q", Group: g, Batch: 1000, MaxPartitions: gcParts, LeaseSeconds: gcLease}, partIDs)
			if err != nil {
				t.Fatalf("final pop %s: %v", g, err)
			}
			for _, m := range r.Messages {
				st.problem("%s: %s delivered after the drain (partition %s, attempt %d)", g, gcKey(m), m.Partition, m.DeliveryAttempt)
			}
		}
	}
	stopBackground()
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !drained {
		t.Errorf("not drained after %v: %d (group, message) pairs not acked, %d leases live", gcDrainFor, missing, leases)
	}
	if n := e.int(`SELECT count(*) FROM pgque.group_dead_letter`); n != 0 {
		t.Errorf("%d dead letters, want none (at most %d failures per message, retryLimit 3)", n, gcMaxFails)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.verify(t)
	st.stats["event table switches"] = int(switches.Load())
	var keys []string
	for k := range st.stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "\n  %s: %d", k, st.stats[k])
	}
	t.Logf("counts:%s", sb.String())
	if st.stats["committed messages"] < 300 {
		t.Errorf("only %d messages committed: the test exercised too little", st.stats["committed messages"])
	}
	sort.Strings(st.problems)
	for i, p := range st.problems {
		if i == 40 {
			t.Errorf("... and %d more", len(st.problems)-40)
			break
		}
		t.Error(p)
	}
}

func gcPayload(key string) json.RawMessage { return payload(map[string]string{"k": key}) }

func gcKey(m broker.Message) string {
	var v struct{ K string }
	if err := json.Unmarshal(m.Data, &v); err != nil || v.K == "" {
		return "?" + string(m.Data)
	}
	return v.K
}

// gcProduceTx runs one producer transaction: 1..3 pushes of 1..20 items in
// all over 1..3 partitions, some with transactionIds; in READ COMMITTED or
// REPEATABLE READ; sometimes held open before the first push and / or
// before the end; 1 in 8 rolled back.
func gcProduceTx(ctx context.Context, conn *pgx.Conn, rng *rand.Rand, st *gcState, p, n, id int, parts []string, mine *[]string) error {
	iso := pgx.ReadCommitted
	if rng.Intn(2) == 0 {
		iso = pgx.RepeatableRead
	}
	hold := time.Duration(0)
	if rng.Intn(4) == 0 {
		hold = time.Duration(30+rng.Intn(400)) * time.Millisecond
	}
	rollback := rng.Intn(8) == 0
	tx := &gcTx{id: id, how: fmt.Sprintf("%s, held %v", iso, hold)}
	var items []*gcItem
	// record notes the transaction and its items (committed or not) and
	// says whether err stops the producer.
	record := func(err error) error {
		st.mu.Lock()
		st.txs = append(st.txs, tx)
		for _, it := range items {
			st.items[it.key] = it
		}
		st.mu.Unlock()
		if gcRetryable(err) || ctx.Err() != nil {
			return nil
		}
		return err
	}
	t, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
	if err != nil {
		return record(err)
	}
	defer func() { _ = t.Rollback(context.Background()) }()
	if _, err := t.Exec(ctx, `SELECT 1`); err != nil { // REPEATABLE READ: the snapshot is taken now
		return record(err)
	}
	if hold > 0 && rng.Intn(2) == 0 {
		gcSleep(ctx, hold) // the snapshot ages across claims, ticks, rotations
	}
	total := 1 + rng.Intn(20)
	pushes := 1 + rng.Intn(min(3, total))
	lanes := parts[:0:0]
	for k := 1 + rng.Intn(3); k > 0; k-- {
		lanes = append(lanes, parts[rng.Intn(len(parts))])
	}
	k := 0
	for push := 0; push < pushes; push++ {
		size := total / pushes
		if push == pushes-1 {
			size = total - k
		}
		var batch []broker.Item
		var its []*gcItem
		for j := 0; j < size; j++ {
			it := &gcItem{key: fmt.Sprintf("m%d-%d-%d", p, n, k), part: lanes[rng.Intn(len(lanes))], tx: tx, idx: k}
			k++
			switch r := rng.Intn(10); {
			case r < 2 && iso == pgx.ReadCommitted:
				// Shared among producers: concurrent pushes of one id
				// serialize on the dedup lock and read committed rows.
				it.txn = fmt.Sprintf("shared-%s-%d", it.part, rng.Intn(40))
			case r < 3 && len(*mine) > 0:
				// One of this producer's own committed ids: a duplicate
				// (at any isolation: committed before this snapshot).
				prev := (*mine)[rng.Intn(len(*mine))]
				it.txn = prev
				it.part = strings.SplitN(prev, "|", 2)[0]
			case r < 4:
				it.txn = fmt.Sprintf("%s|own-%d-%d-%d", it.part, p, n, it.idx)
			case r < 5 && len(its) > 0:
				it.txn, it.part = its[len(its)-1].txn, its[len(its)-1].part // repeated inside the push when set
			}
			batch = append(batch, broker.Item{Queue: "q", Partition: it.part, Payload: gcPayload(it.key), TransactionID: it.txn})
			its = append(its, it)
		}
		if push == 0 {
			tx.pushStart = time.Now()
		}
		res, err := broker.Push(ctx, t, batch)
		if err != nil {
			return record(err)
		}
		for i, r := range res {
			its[i].status, its[i].msgID = r.Status, r.MessageID
			tx.txid = r.Txid
		}
		items = append(items, its...)
		if push < pushes-1 && hold > 0 && rng.Intn(2) == 0 {
			gcSleep(ctx, hold/2) // open across claims between two pushes
		}
	}
	if hold > 0 {
		gcSleep(ctx, hold)
	}
	if rollback {
		return record(t.Rollback(ctx))
	}
	if err := t.Commit(ctx); err != nil {
		return record(err)
	}
	tx.committed, tx.commitEnd = true, time.Now()
	for _, it := range items {
		if it.txn != "" && strings.Contains(it.txn, "|own-") {
			*mine = append(*mine, it.txn)
		}
	}
	_ = record(nil)
	if rng.Intn(3) == 0 {
		// The broker's tick after its pushes (none when one covers them).
		if _, err := conn.Exec(ctx, `SELECT pgque.broker_tick('q', ARRAY[$1::bigint])`, tx.txid); err != nil && !gcRetryable(err) && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// gcConsumer is one consumer of a group.
type gcConsumer struct {
	name, group string
	st          *gcState
	brokers     []*pgxpool.Pool
	partIDs     []int32
	parts       []string
	rng         *rand.Rand
	draining    *atomic.Bool // no crashes, no slow acks: drain
}

// ackItem is one message to ack, with its claim.
type ackItem struct {
	c      *gcClaim
	m      broker.Message
	status string
	noID   bool // without the lease id
}

func (c *gcConsumer) pool() *pgxpool.Pool { return c.brokers[c.rng.Intn(len(c.brokers))] }

// step claims once and handles what it got.
func (c *gcConsumer) step(ctx context.Context) error {
	rng := c.rng
	p := broker.Pop{Queue: "q", Group: c.group, Batch: 1 + rng.Intn(8), MaxPartitions: 1 + rng.Intn(3), LeaseSeconds: gcLease,
		SubscriptionMode: "all", AutoAck: rng.Intn(20) == 0}
	popStart := time.Now()
	tx, err := c.pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var res broker.PopResult
	switch how := rng.Intn(5); how {
	case 0, 1:
		cands := slices.Clone(c.partIDs)
		rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
		res, err = broker.PopList(ctx, tx, p, cands[:1+rng.Intn(len(cands))])
	case 2:
		res, err = broker.PopAny(ctx, tx, p)
	default:
		res, err = broker.PopPartition(ctx, tx, p, c.parts[rng.Intn(len(c.parts))])
	}
	if err != nil {
		if gcRetryable(err) {
			c.st.count("pops failed retryably", 1)
			return nil
		}
		return err
	}
	if len(res.Messages) == 0 {
		_ = tx.Rollback(ctx)
		gcSleep(ctx, time.Duration(20+rng.Intn(40))*time.Millisecond)
		return nil
	}
	// The claim's place in its cursors' claim order, drawn after the claim.
	var order int64
	if err := tx.QueryRow(ctx, `SELECT nextval('public.gc_claim_order')`).Scan(&order); err != nil {
		return err
	}
	if rng.Intn(30) == 0 {
		c.st.count("claims rolled back", 1)
		return tx.Rollback(ctx)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	popEnd := time.Now()
	byPart := map[string]*gcClaim{}
	var claims []*gcClaim
	for _, m := range res.Messages {
		cl := byPart[m.Partition]
		if cl == nil {
			cl = &gcClaim{order: order, group: c.group, part: m.Partition, consumer: c.name, lease: m.LeaseID, auto: p.AutoAck,
				popStart: popStart, popEnd: popEnd, until: m.LeaseUntil, acks: map[string][]gcAck{}}
			byPart[m.Partition] = cl
			claims = append(claims, cl)
		}
		cl.keys = append(cl.keys, gcKey(m))
		cl.msgs = append(cl.msgs, m)
	}
	c.st.mu.Lock()
	for _, cl := range claims {
		c.st.claims[c.group][cl.part] = append(c.st.claims[c.group][cl.part], cl)
	}
	c.st.stats["claims"]++
	c.st.mu.Unlock()
	if p.AutoAck {
		c.st.count("claims auto-acked", 1)
		return nil
	}
	var all []ackItem
	for _, cl := range claims {
		for _, m := range cl.msgs {
			all = append(all, ackItem{c: cl, m: m})
		}
	}
	until := claims[0].until
	r := rng.Intn(100)
	if c.draining.Load() {
		r = 15 + rng.Intn(85)
	}
	switch {
	case r < 5: // crash: nothing acked
		c.st.count("claims abandoned", 1)
		return nil
	case r < 9: // crash after acking only events ahead of an unacked one
		c.st.count("claims abandoned after acks ahead", 1)
		var ahead []ackItem
		for _, cl := range claims {
			for i := 1; i < len(cl.msgs); i++ {
				if rng.Intn(2) == 0 {
					ahead = append(ahead, ackItem{c: cl, m: cl.msgs[i]})
				}
			}
		}
		_, err := c.ack(ctx, ahead, false)
		return err
	case r < 12: // slow: acks after the lease expired
		c.st.count("claims acked after expiry", 1)
		gcSleep(ctx, time.Until(until)+time.Duration(20+rng.Intn(200))*time.Millisecond)
		_, err := c.ack(ctx, all, false)
		return err
	case r < 15: // extends the lease, then acks after the original expiry
		renewed, exp, err := broker.ExtendLease(ctx, c.pool(), claims[0].lease, 3)
		if err != nil {
			return err
		}
		if renewed == len(claims) {
			c.st.mu.Lock()
			for _, cl := range claims {
				cl.until = exp
			}
			c.st.mu.Unlock()
			c.st.count("leases extended", 1)
		}
		gcSleep(ctx, time.Until(until)+time.Duration(20+rng.Intn(200))*time.Millisecond)
		_, err = c.ack(ctx, all, false)
		return err
	case r < 27: // retry or fail one event of a partition, after completing the ones before it
		cl := claims[rng.Intn(len(claims))]
		j := rng.Intn(len(cl.msgs))
		var items []ackItem
		for i := 0; i < j; i++ {
			items = append(items, ackItem{c: cl, m: cl.msgs[i]})
		}
		status := broker.AckRetry
		c.st.mu.Lock()
		if rng.Intn(2) == 0 && c.st.fails[c.group+"/"+cl.keys[j]] < gcMaxFails {
			status = broker.AckFailed
		}
		c.st.mu.Unlock()
		items = append(items, ackItem{c: cl, m: cl.msgs[j], status: status})
		if rng.Intn(2) == 0 {
			rng.Shuffle(len(items), func(a, b int) { items[a], items[b] = items[b], items[a] })
		}
		// The other partitions of the claim are acked as usual.
		for _, o := range claims {
			if o != cl {
				for _, m := range o.msgs {
					items = append(items, ackItem{c: o, m: m})
				}
			}
		}
		_, err := c.ack(ctx, items, false)
		return err
	}
	// A normal consumer: in order or shuffled, one call or chunks, maybe
	// without the lease id (first delivery only), maybe first inside a
	// transaction that rolls back, maybe repeated.
	if rng.Intn(3) == 0 {
		rng.Shuffle(len(all), func(a, b int) { all[a], all[b] = all[b], all[a] })
	}
	if rng.Intn(8) == 0 {
		for i := range all {
			all[i].noID = true
		}
	}
	if rng.Intn(15) == 0 {
		t, err := c.pool().Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := broker.AckBatch(ctx, t, c.group, c.acks(all)); err != nil {
			_ = t.Rollback(context.Background())
			return err
		}
		if err := t.Rollback(ctx); err != nil {
			return err
		}
		c.st.count("ack calls rolled back", 1)
	}
	chunks := [][]ackItem{all}
	if len(all) > 1 && rng.Intn(3) == 0 {
		cut := 1 + rng.Intn(len(all)-1)
		chunks = [][]ackItem{all[:cut], all[cut:]}
	}
	for _, ch := range chunks {
		if _, err := c.ack(ctx, ch, false); err != nil {
			return err
		}
	}
	if rng.Intn(6) == 0 {
		for _, ch := range chunks {
			if _, err := c.ack(ctx, ch, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// claimResolved: every event of the claim has an applied ack resolving it
// (completed; not retry or failed), key's among its acks before prior's
// end (the others' from cl.acks): the position has passed them all.
func claimResolved(cl *gcClaim, key string, prior []gcAck) bool {
	resolves := func(a gcAck) bool {
		return a.res.Success && !a.res.Noop && a.status != broker.AckRetry && a.status != broker.AckFailed
	}
	for _, k := range cl.keys {
		as := cl.acks[k]
		if k == key {
			as = prior
		}
		if !slices.ContainsFunc(as, resolves) {
			return false
		}
	}
	return len(cl.keys) > 0
}

func (c *gcConsumer) acks(items []ackItem) []broker.Ack {
	out := make([]broker.Ack, len(items))
	for i, it := range items {
		out[i] = broker.Ack{TransactionID: it.m.TransactionID, PartitionID: it.m.PartitionUUID, Status: it.status}
		if !it.noID || it.m.DeliveryAttempt > 1 && c.rng.Intn(2) == 0 {
			out[i].LeaseID = it.m.LeaseID
		}
	}
	return out
}

// ack sends one ack call and records each item's outcome, checking what
// can be checked at once: nothing applied after the lease expired or
// without the lease id of a redelivered batch; an ack inside a live lease
// applied; a repeat never applied, and never refused once the claim's
// every event was resolved.
func (c *gcConsumer) ack(ctx context.Context, items []ackItem, repeat bool) ([]broker.AckResult, error) {
	if len(items) == 0 {
		return nil, nil
	}
	acks := c.acks(items)
	start := time.Now()
	res, err := broker.AckBatch(ctx, c.pool(), c.group, acks)
	end := time.Now()
	if err != nil {
		if gcRetryable(err) {
			c.st.count("ack calls failed retryably", 1)
			return nil, nil
		}
		return nil, err
	}
	st := c.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.stats["ack calls"]++
	for i, it := range items {
		r := res[i]
		cl, key := it.c, gcKey(it.m)
		a := gcAck{status: it.status, leaseGiven: acks[i].LeaseID != "", repeat: repeat, start: start, end: end, res: r}
		prior := cl.acks[key]
		cl.acks[key] = append(cl.acks[key], a)
		applied := r.Success && !r.Noop
		where := fmt.Sprintf("%s: ack of %s (status %q, lease given %v, attempt %d, repeat %v, call %s-%s) under %s", c.group, key,
			it.status, a.leaseGiven, it.m.DeliveryAttempt, repeat, start.Format("15:04:05.000"), end.Format("15:04:05.000"), cl)
		switch {
		case r.DLQ:
			st.problems = append(st.problems, where+": dead-lettered")
		case applied && start.After(cl.until.Add(2*time.Millisecond)):
			st.problems = append(st.problems, where+": applied after the lease expired")
		case applied && !a.leaseGiven && it.m.DeliveryAttempt > 1:
			st.problems = append(st.problems, where+": applied without the lease id of a redelivered batch")
		case applied && slices.ContainsFunc(prior, func(p gcAck) bool { return p.res.Success && !p.res.Noop }):
			st.problems = append(st.problems, where+": applied twice")
		case repeat && !r.Success && claimResolved(cl, key, prior):
			// Every event of the claim was resolved by an applied ack: the
			// position is past them all, so acking one again is a noop
			// whatever the lease (docs/design/broker.md "The cursor model", Ack).
			st.problems = append(st.problems, fmt.Sprintf("%s: a repeat of a resolved claim refused (%q)", where, r.Error))
		case !applied && !repeat && a.leaseGiven && cl.redeliverAt.IsZero() && len(prior) == 0 &&
			start.Before(cl.until.Add(-500*time.Millisecond)):
			// The first ack of the event under a live lease not released:
			// it must be applied.
			st.problems = append(st.problems, fmt.Sprintf("%s: not applied inside the live lease (success %v, noop %v, %q)", where, r.Success, r.Noop, r.Error))
		}
		switch {
		case repeat && r.Noop:
			st.stats["repeated acks: noop"]++
		case repeat && r.Success:
			st.stats["repeated acks: applied (the first was refused)"]++
		case repeat:
			st.stats["repeated acks: refused ("+r.Error+")"]++
		case !r.Success:
			st.stats["acks refused"]++
		case r.Noop:
			st.stats["acks noop"]++
		}
		if applied && it.status == broker.AckFailed {
			st.fails[c.group+"/"+key]++
		}
		if r.Redeliver {
			st.stats["acks releasing for a retry"]++
			if cl.redeliverAt.IsZero() {
				cl.redeliverAt = start
			}
		}
	}
	return res, nil
}

// resolvedPrefix is the part of claim c the position moved over: its
// events up to the first one without an applied completed ack (every
// event, with auto-ack).
func (c *gcClaim) resolvedPrefix() []string {
	if c.auto {
		return c.keys
	}
	for i, k := range c.keys {
		if !slices.ContainsFunc(c.acks[k], func(a gcAck) bool {
			return a.res.Success && !a.res.Noop && a.status != broker.AckRetry && a.status != broker.AckFailed
		}) {
			return c.keys[:i]
		}
	}
	return c.keys
}

// unresolved counts the (group, committed message) pairs with no claim
// that resolved the message (st.mu held).
func (s *gcState) unresolved() int {
	n := 0
	for _, g := range gcGroups {
		done := map[string]bool{}
		for _, claims := range s.claims[g] {
			for _, c := range claims {
				for _, k := range c.resolvedPrefix() {
					done[k] = true
				}
			}
		}
		for _, it := range s.items {
			if it.queued() && !done[it.key] {
				n++
			}
		}
	}
	return n
}

// verify checks the contract on everything recorded (st.mu held).
func (s *gcState) verify(t *testing.T) {
	t.Helper()
	add := func(format string, args ...any) { s.problems = append(s.problems, fmt.Sprintf(format, args...)) }
	// Dedup: one queued message per (partition, transactionId) among the
	// committed pushes; every committed duplicate names it.
	type pk struct{ part, txn string }
	queuedBy := map[pk]*gcItem{}
	var committed []*gcItem
	for _, it := range s.items {
		if !it.tx.committed {
			s.stats["rolled-back items"]++
			continue
		}
		if it.status == broker.StatusQueued {
			committed = append(committed, it)
		} else {
			s.stats["duplicates"]++
		}
		if it.txn == "" || it.status != broker.StatusQueued {
			continue
		}
		k := pk{it.part, it.txn}
		if o := queuedBy[k]; o != nil {
			add("dedup: transactionId %q in %s queued twice: %s (tx %d, %s) and %s (tx %d, %s)", it.txn, it.part, o.key, o.tx.id, o.tx.how, it.key, it.tx.id, it.tx.how)
		}
		queuedBy[k] = it
	}
	for _, it := range s.items {
		if it.tx.committed && it.status == broker.StatusDuplicate {
			if o := queuedBy[pk{it.part, it.txn}]; o == nil {
				add("dedup: %s (transactionId %q in %s) is a duplicate of no committed message", it.key, it.txn, it.part)
			} else if o.msgID != it.msgID {
				add("dedup: %s (transactionId %q) names message %s, the queued one is %s (%s)", it.key, it.txn, it.msgID, o.msgID, o.key)
			}
		}
	}
	s.stats["committed messages"] = len(committed)

	for _, g := range gcGroups {
		resolvedIn := map[string]*gcClaim{}
		pos := map[string]int{} // key -> index in its partition's resolved sequence
		for _, part := range sortedKeys(s.claims[g]) {
			claims := s.claims[g][part]
			sort.Slice(claims, func(i, j int) bool { return claims[i].order < claims[j].order })
			last := map[string]*gcClaim{}
			var seq []string
			for _, c := range claims {
				for i, k := range c.keys {
					it := s.items[k]
					switch {
					case it == nil:
						add("%s: %s delivered an unknown message %q", g, c, k)
					case !it.tx.committed:
						add("%s: %s delivered %s of a rolled-back transaction (%s)", g, c, k, it.tx.how)
					case it.status != broker.StatusQueued:
						add("%s: %s delivered %s, a duplicate that was never stored", g, c, k)
					case it.msgID != c.msgs[i].ID || it.part != part:
						add("%s: %s delivered %s as message %s in %s, pushed as %s in %s", g, c, k, c.msgs[i].ID, part, it.msgID, it.part)
					}
					if r := resolvedIn[k]; r != nil {
						add("%s: %s delivered %s again after it was acked under %s\n%s", g, c, k, r, s.history(g, part, k))
					} else if prev := last[k]; prev != nil {
						switch {
						case !c.popEnd.Before(prev.until):
							s.stats["redeliveries after expiry"]++
						case !prev.redeliverAt.IsZero() && prev.redeliverAt.Before(c.popEnd):
							s.stats["redeliveries after a retry"]++
						default:
							add("%s: %s redelivered %s while %s was live and released for no retry\n%s", g, c, k, prev, s.history(g, part, k))
						}
					}
					last[k] = c
				}
				prefix := c.resolvedPrefix()
				if !c.auto && len(prefix) == len(c.keys) && !slices.ContainsFunc(c.keys, func(k string) bool {
					return slices.ContainsFunc(c.acks[k], func(a gcAck) bool { return a.res.LeaseReleased })
				}) {
					add("%s: every event of %s acked, the lease never released (the position did not reach the batch end)\n%s",
						g, c, s.history(g, part, c.keys[0]))
				}
				for _, k := range prefix {
					if resolvedIn[k] == nil {
						resolvedIn[k] = c
						pos[k] = len(seq)
						seq = append(seq, k)
					}
				}
			}
			s.checkOrder(g, part, seq, add)
		}
		for _, it := range committed {
			if resolvedIn[it.key] == nil {
				add("%s: %s (partition %s, tx %d: %s, committed %s) never acked\n%s", g, it.key, it.part, it.tx.id, it.tx.how,
					it.tx.commitEnd.Format("15:04:05.000"), s.history(g, it.part, it.key))
			}
		}
	}
}

// checkOrder checks a partition's resolved sequence against the commit
// order (see the top of the file).
func (s *gcState) checkOrder(g, part string, seq []string, add func(string, ...any)) {
	at := map[string]int{}
	for i, k := range seq {
		at[k] = i
	}
	// (1) one transaction's events: contiguous, in push order.
	byTx := map[*gcTx][]*gcItem{}
	for _, k := range seq {
		it := s.items[k]
		if it != nil {
			byTx[it.tx] = append(byTx[it.tx], it)
		}
	}
	for tx, its := range byTx {
		sort.Slice(its, func(i, j int) bool { return its[i].idx < its[j].idx })
		for j := 1; j < len(its); j++ {
			if at[its[j].key] != at[its[j-1].key]+1 {
				add("%s %s: transaction %d (%s) not contiguous in push order: %s at %d, %s at %d\n%s", g, part, tx.id, tx.how,
					its[j-1].key, at[its[j-1].key], its[j].key, at[its[j].key], s.around(seq, at[its[j].key]))
				break
			}
		}
	}
	// (2) a transaction committed before another began comes first.
	reported := 0
	var minEnd time.Time
	var minIt *gcItem
	for i := len(seq) - 1; i >= 0 && reported < 5; i-- {
		it := s.items[seq[i]]
		if it == nil {
			continue
		}
		if minIt != nil && minEnd.Before(it.tx.pushStart) && minIt.tx != it.tx {
			add("%s %s: %s (tx %d, first push %s) resolved before %s (tx %d, committed %s, before the other began)\n%s", g, part,
				it.key, it.tx.id, it.tx.pushStart.Format("15:04:05.000000"), minIt.key, minIt.tx.id,
				minIt.tx.commitEnd.Format("15:04:05.000000"), s.around(seq, i))
			reported++
		}
		if minIt == nil || it.tx.commitEnd.Before(minEnd) {
			minEnd, minIt = it.tx.commitEnd, it
		}
	}
}

// around renders the resolved sequence near index i.
func (s *gcState) around(seq []string, i int) string {
	var sb strings.Builder
	for j := max(0, i-4); j < min(len(seq), i+5); j++ {
		it := s.items[seq[j]]
		mark := "  "
		if j == i {
			mark = "=>"
		}
		fmt.Fprintf(&sb, "    %s %d: %s tx %d (txid %d, pushed %s, committed %s)\n", mark, j, seq[j], it.tx.id, it.tx.txid,
			it.tx.pushStart.Format("15:04:05.000000"), it.tx.commitEnd.Format("15:04:05.000000"))
	}
	return sb.String()
}

// history lists every claim of key by group g, with its acks.
func (s *gcState) history(g, part, key string) string {
	var sb strings.Builder
	for _, c := range s.claims[g][part] {
		i := slices.Index(c.keys, key)
		if i < 0 {
			continue
		}
		fmt.Fprintf(&sb, "    %s: batch %v, attempt %d, auto %v\n", c, c.keys, c.msgs[i].DeliveryAttempt, c.auto)
		for _, k := range c.keys {
			for _, a := range c.acks[k] {
				fmt.Fprintf(&sb, "      ack %s %q lease %v repeat %v at %s: success %v noop %v released %v redeliver %v %s\n", k, a.status,
					a.leaseGiven, a.repeat, a.start.Format("15:04:05.000"), a.res.Success, a.res.Noop, a.res.LeaseReleased, a.res.Redeliver, a.res.Error)
			}
		}
	}
	if sb.Len() == 0 {
		return "    never delivered"
	}
	return sb.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The order checks of TestGroupConcurrencyRandomized can fail: a
// transaction split or reordered, and a transaction served before one
// that committed before it began, are reported; commit order is not.
func TestGroupConcurrencyOrderCheck(t *testing.T) {
	t0 := time.Now()
	a := &gcTx{id: 1, committed: true, pushStart: t0, commitEnd: t0.Add(10 * time.Millisecond)}
	b := &gcTx{id: 2, committed: true, pushStart: t0.Add(20 * time.Millisecond), commitEnd: t0.Add(30 * time.Millisecond)}
	c := &gcTx{id: 3, committed: true, pushStart: t0.Add(5 * time.Millisecond), commitEnd: t0.Add(40 * time.Millisecond)} // overlaps a and b
	s := &gcState{items: map[string]*gcItem{}}
	for _, it := range []*gcItem{{key: "a0", tx: a}, {key: "a1", tx: a, idx: 1}, {key: "b0", tx: b}, {key: "c0", tx: c}} {
		s.items[it.key] = it
	}
	for _, tc := range []struct {
		seq  []string
		want string
	}{
		{[]string{"a0", "a1", "b0", "c0"}, ""},
		{[]string{"c0", "a0", "a1", "b0"}, ""}, // c overlaps both: either order
		{[]string{"a0", "c0", "b0", "a1"}, "not contiguous"},
		{[]string{"a1", "a0", "b0"}, "not contiguous"},
		{[]string{"b0", "a0", "a1"}, "before the other began"},
	} {
		var got []string
		s.checkOrder("g", "p", tc.seq, func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) })
		if tc.want == "" && len(got) > 0 || tc.want != "" && !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tc.want) }) {
			t.Errorf("%v: got %q, want %q", tc.seq, got, tc.want)
		}
	}
}
