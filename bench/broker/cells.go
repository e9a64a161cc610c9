package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// runner runs the cells against the environment.
type runner struct {
	e   *env
	c   *client
	p   Params
	log func(msg string, args ...any)
	// cells: --cells (empty: all).
	cells []string
}

// body pads every payload to about 100 bytes of JSON.
var payloadBody = strings.Repeat("x", 72)

// loopStats are the counters of a set of consumers; recorded only while
// measuring is set (warm-up pops are not counted).
type loopStats struct {
	measuring   atomic.Bool
	pops        atomic.Int64
	popsWithMsg atomic.Int64
	consumed    atomic.Int64
	errors      atomic.Int64
	mu          sync.Mutex
	popMs       []float64
}

// recordPop counts a pop that started while measuring (counted is the
// flag at its start: a slow pop started in the window counts, however long
// it takes).
func (s *loopStats) recordPop(counted bool, ms float64, n int) {
	if !counted {
		return
	}
	s.pops.Add(1)
	if n > 0 {
		s.popsWithMsg.Add(1)
	}
	s.mu.Lock()
	s.popMs = append(s.popMs, ms)
	s.mu.Unlock()
}

// consume runs one consumer until ctx ends: wildcard pop on queue, ack the
// messages as completed unless auto-acked. idle is the pause after an
// empty pop (0 for long-polling consumers). ctx's end stops the loop,
// never a request: a pop cut off after the broker leased a partition
// would leave that partition leased into the next cell, so the last pop
// finishes and its messages are acked.
func (r *runner) consume(ctx context.Context, base, queue string, o popOpts, idle time.Duration, st *loopStats) {
	for ctx.Err() == nil {
		t0 := time.Now()
		counted := st.measuring.Load()
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reqTimeout)
		msgs, err := r.c.pop(pctx, base, queue, o)
		cancel()
		at := time.Now()
		if err != nil {
			if counted {
				st.errors.Add(1)
			}
			sleepCtx(ctx, 10*time.Millisecond)
			continue
		}
		st.recordPop(counted, msSub(at, t0), len(msgs))
		if len(msgs) == 0 {
			sleepCtx(ctx, idle)
			continue
		}
		n := len(msgs)
		if !o.autoAck {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reqTimeout)
			n, err = r.c.ack(actx, base, o.group, msgs)
			cancel()
			if err != nil && counted {
				st.errors.Add(1)
			}
		}
		if counted {
			st.consumed.Add(int64(n))
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// latencyCell: an open-loop producer pushes one message per request at
// LatencyRate to pushURL; LatencyConsumers long-poll wildcard pops on
// popURL and ack. Latency per message = pop received − push answered. The
// load runs in a process of its own (loadclient.go), whose CPU is the
// cell's client CPU.
func (r *runner) latencyCell(ctx context.Context, c *Cell, pushURL, popURL string) error {
	p := r.p
	cfg := r.e.cfg
	spec := loadSpec{PushURL: pushURL, PopURL: popURL, Queue: "lat-" + c.Name, Rate: p.LatencyRate, Duration: p.LatencyDuration,
		Partitions: p.LatencyPartitions, Consumers: p.LatencyConsumers, Drain: p.LatencyDrain, TransactionIDs: cfg.TransactionIDs}
	var profiles []string
	if cfg.ClientPprof {
		spec.CPUProfile = filepath.Join(cfg.OutDir, c.Name+"-client.pprof")
		profiles = append(profiles, filepath.Base(spec.CPUProfile))
	}
	lc, err := startLoadClient(ctx, spec, cfg.Stderr)
	if err != nil {
		return err
	}
	defer lc.stop()
	r.e.clientPid = lc.pid()
	defer func() { r.e.clientPid = 0 }()
	snap, err := r.e.beginCell(ctx, true)
	if err != nil {
		return err
	}
	if err := lc.send("go"); err != nil {
		return err
	}
	profDone := r.e.profileBrokers(ctx, c.Name, p.LatencyDuration)
	if err := lc.expect("done"); err != nil {
		return err
	}
	if err := r.e.endCell(ctx, snap, c); err != nil {
		return err
	}
	res, err := lc.report()
	if err != nil {
		return err
	}
	serveProfiles, perr := profDone()
	if perr != nil {
		c.Notes = append(c.Notes, "serve's CPU profile failed: "+perr.Error())
	}
	profiles = append(serveProfiles, profiles...)
	c.Seconds = res.Seconds
	c.Pushed, c.Consumed = res.Pushed, res.Consumed
	c.PushRate = float64(c.Pushed) / res.Seconds
	c.Latency, c.SendLatency = res.Latency, res.SendLatency
	c.PushRequest, c.PopRequest = res.PushRequest, res.PopRequest
	c.Steps = res.Steps
	c.Pops, c.PopsWithMsg = res.Pops, res.PopsWithMsg
	c.Errors = res.Errors
	c.Duplicates, c.Late, c.Missing, c.BeforeAck = res.Duplicates, res.Late, res.Missing, res.BeforeAck
	c.Profiles = profiles
	if c.Pushed > 0 {
		c.WALPerPushed = float64(c.WALBytes) / float64(c.Pushed)
		c.Notes = append(c.Notes, "WAL per message covers the push (one message per request), the pop and the ack")
	}
	if c.Missing > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d answered pushes not popped within %s of the producer's end: the percentiles cover the popped ones only", c.Missing, p.LatencyDrain))
	}
	if c.Late > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("the producer fell behind: %d pushes waited for one of %d in-flight slots (%.0f msg/s achieved of %d)", c.Late, producerSlots, c.PushRate, p.LatencyRate))
	}
	return nil
}

// pushCell: Pushers clients push PushBatch items per request over
// PushPartitions partitions of one queue, as fast as answered.
func (r *runner) pushCell(ctx context.Context, c *Cell, base, queue string) error {
	p := r.p
	if _, err := r.c.push(ctx, base, []pushItem{{Queue: queue, Partition: "p00", Seq: -1}}); err != nil {
		return fmt.Errorf("warm-up push: %w", err)
	}
	snap, err := r.e.beginCell(ctx, true)
	if err != nil {
		return err
	}
	var pushed, errs atomic.Int64
	var mu sync.Mutex
	var reqMs []float64
	var wg sync.WaitGroup
	start := time.Now()
	dctx, cancel := context.WithDeadline(ctx, start.Add(p.PushDuration))
	defer cancel()
	for w := range p.Pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			items := make([]pushItem, p.PushBatch)
			for k := 0; dctx.Err() == nil; k++ {
				for j := range items {
					items[j] = pushItem{Queue: queue, Partition: fmt.Sprintf("p%02d", (w+k*p.PushBatch+j)%p.PushPartitions),
						Seq: int64(k*p.PushBatch + j), Body: payloadBody}
				}
				t0 := time.Now()
				n, err := r.c.push(dctx, base, items)
				if err != nil {
					if dctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				pushed.Add(int64(n))
				mu.Lock()
				reqMs = append(reqMs, msSince(t0))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := r.e.endCell(ctx, snap, c); err != nil {
		return err
	}
	c.Seconds = elapsed.Seconds()
	c.Pushed = pushed.Load()
	c.PushRate = float64(c.Pushed) / elapsed.Seconds()
	c.PushRequest = summarize(reqMs)
	c.Errors = errs.Load()
	if c.Pushed > 0 {
		c.WALPerPushed = float64(c.WALBytes) / float64(c.Pushed)
	}
	return nil
}

// popAckCell: PopConsumers clients pop (wildcard, PopBatch) and ack the
// backlog of the push cell, until it is drained or PopDuration passed.
func (r *runner) popAckCell(ctx context.Context, c *Cell, base, queue string, backlog int64) error {
	p := r.p
	snap, err := r.e.beginCell(ctx, true)
	if err != nil {
		return err
	}
	st := &loopStats{}
	st.measuring.Store(true)
	start := time.Now()
	dctx, cancel := context.WithDeadline(ctx, start.Add(p.PopDuration))
	defer cancel()
	var wg sync.WaitGroup
	o := popOpts{batch: p.PopBatch}
	for range p.PopConsumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.consume(dctx, base, queue, o, 5*time.Millisecond, st)
		}()
	}
	// Stop when the backlog is consumed.
	for dctx.Err() == nil && st.consumed.Load() < backlog {
		sleepCtx(dctx, 10*time.Millisecond)
	}
	cancel()
	wg.Wait()
	elapsed := time.Since(start)
	if err := r.e.endCell(ctx, snap, c); err != nil {
		return err
	}
	c.Seconds = elapsed.Seconds()
	c.Consumed = st.consumed.Load()
	c.ConsumeRate = float64(c.Consumed) / elapsed.Seconds()
	c.Pops, c.PopsWithMsg = st.pops.Load(), st.popsWithMsg.Load()
	c.PopsPerSec = float64(c.Pops) / elapsed.Seconds()
	c.PopRequest = summarize(st.popMs)
	c.Errors = st.errors.Load()
	if c.Consumed > 0 {
		c.WALPerConsumed = float64(c.WALBytes) / float64(c.Consumed)
	}
	if c.Consumed < backlog {
		c.Notes = append(c.Notes, fmt.Sprintf("stopped at the time limit: %d of %d backlog messages consumed", c.Consumed, backlog))
	} else {
		c.Notes = append(c.Notes, fmt.Sprintf("backlog of %d messages drained", backlog))
	}
	return nil
}

// seedPartitions creates partitions k00000.. of queue (one message each)
// and pops them all (auto-ack), so the group has a cursor in every one.
func (r *runner) seedPartitions(ctx context.Context, base, queue string, partitions int) error {
	items := make([]pushItem, 0, 1000)
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		_, err := r.c.push(ctx, base, items)
		items = items[:0]
		return err
	}
	for i := range partitions {
		items = append(items, pushItem{Queue: queue, Partition: partName(i), Seq: -1})
		if len(items) == cap(items) {
			if err := flush(); err != nil {
				return fmt.Errorf("seeding %s: %w", queue, err)
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("seeding %s: %w", queue, err)
	}
	// Drain with auto-ack pops claiming 200 partitions each (a pop claiming
	// 1,000 of 10,000 partitions overran the broker's 30 s statement
	// timeout on a loaded machine); a failed pop is retried.
	got, fails := 0, 0
	o := popOpts{batch: 200, partitions: 200, autoAck: true}
	for deadline := time.Now().Add(5 * time.Minute); got < partitions; {
		msgs, err := r.c.pop(ctx, base, queue, o)
		if err != nil {
			if fails++; fails > 5 || ctx.Err() != nil {
				return fmt.Errorf("draining the seed of %s (%d of %d popped): %w", queue, got, partitions, err)
			}
			r.log("seed drain pop failed, retrying", "queue", queue, "err", err)
			continue
		}
		got += len(msgs)
		if len(msgs) == 0 {
			sleepCtx(ctx, 20*time.Millisecond)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("draining the seed of %s: %d of %d after 5 minutes", queue, got, partitions)
		}
	}
	return nil
}

func partName(i int) string { return fmt.Sprintf("k%05d", i) }

// wildcardCell: a queue of c.Partitions partitions (seeded), 10 of them
// fed at HotRate; HotConsumers poll wildcard pops without waiting (5 ms
// pause after an empty one) and ack. Measures the pop's HTTP latency and
// PostgreSQL's time per pop (pg_stat_statements).
func (r *runner) wildcardCell(ctx context.Context, c *Cell, base, queue string) error {
	p := r.p
	hot := make([]string, 10)
	for i := range hot {
		hot[i] = partName(i * c.Partitions / len(hot))
	}
	st := &loopStats{}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	o := popOpts{batch: 50}
	for range p.HotConsumers {
		wg.Add(1)
		go func() { defer wg.Done(); r.consume(cctx, base, queue, o, 5*time.Millisecond, st) }()
	}
	var pushed, perrs atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		interval := time.Second / time.Duration(p.HotRate)
		start := time.Now()
		for i := 0; cctx.Err() == nil; i++ {
			sleepCtx(cctx, time.Until(start.Add(time.Duration(i)*interval)))
			_, err := r.c.push(cctx, base, []pushItem{{Queue: queue, Partition: hot[i%len(hot)], Seq: int64(i), Body: payloadBody}})
			switch {
			case err != nil && cctx.Err() == nil:
				perrs.Add(1)
			case err == nil && st.measuring.Load():
				pushed.Add(1)
			}
		}
	}()
	defer wg.Wait()
	defer stop()
	// Warm-up (a cold hot-list reseeds on its first pops), then measure.
	sleepCtx(ctx, time.Second)
	snap, err := r.e.beginCell(ctx, false)
	if err != nil {
		return err
	}
	st.measuring.Store(true)
	start := time.Now()
	sleepCtx(ctx, p.HotDuration)
	st.measuring.Store(false)
	elapsed := time.Since(start)
	// The pops started in the window finish (and count) before the
	// statements are read.
	stop()
	wg.Wait()
	if err := r.e.endCell(ctx, snap, c); err != nil {
		return err
	}
	if st.pops.Load() == 0 {
		return fmt.Errorf("no pop answered in %s (%d failed)", p.HotDuration, st.errors.Load())
	}
	c.Seconds = elapsed.Seconds()
	c.Consumers = p.HotConsumers
	c.Pushed, c.Consumed = pushed.Load(), st.consumed.Load()
	c.Pops, c.PopsWithMsg = st.pops.Load(), st.popsWithMsg.Load()
	c.PopsPerSec = float64(c.Pops) / elapsed.Seconds()
	c.PopRequest = summarize(st.popMs)
	c.Errors = st.errors.Load() + perrs.Load()
	setPGPopCost(c)
	return nil
}

// prefill pushes n messages over partitions partitions of queue, 1,000
// per request.
func (r *runner) prefill(ctx context.Context, base, queue string, n, partitions int) error {
	items := make([]pushItem, 0, 1000)
	for i := range n {
		items = append(items, pushItem{Queue: queue, Partition: partName(i % partitions), Seq: int64(i), Body: payloadBody})
		if len(items) == cap(items) || i == n-1 {
			if _, err := r.c.push(ctx, base, items); err != nil {
				return fmt.Errorf("prefilling %s: %w", queue, err)
			}
			items = items[:0]
		}
	}
	return nil
}

// consumersCell: ManyConsumers long-polling clients over ManyPartitions
// partitions holding ManyBacklog messages, with ManyRate more per second.
func (r *runner) consumersCell(ctx context.Context, c *Cell, base, queue string) error {
	p := r.p
	if err := r.prefill(ctx, base, queue, p.ManyBacklog, p.ManyPartitions); err != nil {
		return err
	}
	snap, err := r.e.beginCell(ctx, true)
	if err != nil {
		return err
	}
	st := &loopStats{}
	st.measuring.Store(true)
	start := time.Now()
	dctx, cancel := context.WithDeadline(ctx, start.Add(p.ManyDuration))
	defer cancel()
	var wg sync.WaitGroup
	o := popOpts{batch: p.ManyBatch, wait: true, timeout: time.Second}
	for range p.ManyConsumers {
		wg.Add(1)
		go func() { defer wg.Done(); r.consume(dctx, base, queue, o, 0, st) }()
	}
	var pushed, perrs atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		per := max(1, p.ManyRate/100) // one push every 10 ms
		rnd := rand.New(rand.NewPCG(1, 2))
		for i := 0; dctx.Err() == nil; i++ {
			sleepCtx(dctx, time.Until(start.Add(time.Duration(i)*10*time.Millisecond)))
			batch := make([]pushItem, per)
			for j := range batch {
				batch[j] = pushItem{Queue: queue, Partition: partName(rnd.IntN(p.ManyPartitions)), Seq: int64(i), Body: payloadBody}
			}
			n, err := r.c.push(dctx, base, batch)
			if err != nil {
				if dctx.Err() == nil {
					perrs.Add(1)
				}
				continue
			}
			pushed.Add(int64(n))
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	if err := r.e.endCell(ctx, snap, c); err != nil {
		return err
	}
	if st.pops.Load() == 0 {
		return fmt.Errorf("no pop answered in %s (%d failed)", p.ManyDuration, st.errors.Load())
	}
	c.Seconds = elapsed.Seconds()
	c.Consumers = p.ManyConsumers
	c.Pushed, c.Consumed = pushed.Load(), st.consumed.Load()
	c.ConsumeRate = float64(c.Consumed) / elapsed.Seconds()
	c.Pops, c.PopsWithMsg = st.pops.Load(), st.popsWithMsg.Load()
	c.PopsPerSec = float64(c.PopsWithMsg) / elapsed.Seconds()
	c.PopRequest = summarize(st.popMs)
	c.Errors = st.errors.Load() + perrs.Load()
	setPGPopCost(c)
	c.Notes = append(c.Notes, fmt.Sprintf("backlog %d messages at the start, %d msg/s pushed meanwhile; pops/s counts pops that returned messages", p.ManyBacklog, p.ManyRate))
	return nil
}

// setPGPopCost sets the PostgreSQL time per HTTP pop: the pop statements
// plus the hot-list's reseed scans (a cost of serving pops too), and the
// reseeds' share apart.
func setPGPopCost(c *Cell) {
	if c.Pops == 0 {
		return
	}
	var pop, reseed float64
	if s := c.Statements["pop"]; s != nil {
		pop = s.TotalMs
	}
	if s := c.Statements["reseed"]; s != nil {
		reseed = s.TotalMs
	}
	if pop+reseed > 0 {
		c.PGPopMsPerPop = round3((pop + reseed) / float64(c.Pops))
		c.PGReseedMsPerPop = round3(reseed / float64(c.Pops))
	}
}
