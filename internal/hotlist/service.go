package hotlist

import (
	"context"
	"sync"
	"time"
)

type service struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start runs the background loops: the wake tick, the reseed floor, the
// idle sweep, the peer hint sender and the summary log line. They stop
// when ctx ends or Stop is called. Starting twice is a no-op.
func (h *HotList) Start(ctx context.Context) {
	h.svc.mu.Lock()
	defer h.svc.mu.Unlock()
	if h.svc.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	h.svc.cancel = cancel
	loop := func(every time.Duration, fn func(context.Context)) {
		if every <= 0 {
			return
		}
		h.svc.wg.Add(1)
		go func() {
			defer h.svc.wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					fn(ctx)
				}
			}
		}()
	}
	// The wake tick and the hint sender run on demand: on this kind of VM
	// every timer wake-up is a thread wake-up, and two free-running 5 ms
	// tickers cost an idle broker ~2 % of a core.
	demand := func(every time.Duration, kick <-chan struct{}, ls *loopStats, round func(context.Context) time.Duration) {
		if every <= 0 {
			return
		}
		h.svc.wg.Add(1)
		go func() {
			defer h.svc.wg.Done()
			demandLoop(ctx, every, kick, ls, round)
		}()
	}
	demand(h.o.WakeTick, h.wake.kick, &h.st.wakeLoop, func(context.Context) time.Duration {
		_, wait := h.wakeRound()
		return wait
	})
	if h.o.Reseeder != nil && h.o.ReseedInterval > 0 {
		loop(min(time.Second, h.o.ReseedInterval), func(ctx context.Context) { h.ReseedDue(ctx) })
	}
	if !h.o.DisableSweep {
		loop(h.o.SweepInterval, func(context.Context) { h.Sweep() })
	}
	if h.o.Peers != nil {
		demand(h.o.HintFlush, h.hints.kick, &h.st.hintLoop, func(ctx context.Context) time.Duration {
			h.FlushHints(ctx)
			if h.hints.len() > 0 {
				return 0
			}
			return -1
		})
	}
	if h.o.LogInterval > 0 {
		var prev Stats
		loop(h.o.LogInterval, func(context.Context) { prev = h.LogStats(prev) })
	}
}

// Stop ends the background loops and waits for them (at most until ctx
// ends). A reseed in progress is cancelled.
func (h *HotList) Stop(ctx context.Context) error {
	h.svc.mu.Lock()
	cancel := h.svc.cancel
	h.svc.cancel = nil
	h.svc.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	done := make(chan struct{})
	go func() { h.svc.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// demandLoop calls round on the grid of a ticker of period every started
// with the loop, as long as round asks for it: its answer 0 means at the
// next grid point (the free-running ticker's timing while there is work),
// > 0 at the first grid point at least that long after the round began,
// < 0 not before a kick. A kick during a wait of the two latter kinds
// brings the next round to the next grid point (marks still coalesce for
// up to one period). The kickers change their state first and kick after
// (non-blocking, buffer 1); a kick that arrives before a round is consumed
// just before it (the round sees that state), one that arrives after stays
// buffered: the loop never sleeps on a change it was kicked for.
func demandLoop(ctx context.Context, every time.Duration, kick <-chan struct{}, ls *loopStats, round func(context.Context) time.Duration) {
	start := time.Now()
	t := time.NewTimer(every)
	defer t.Stop()
	var wait time.Duration    // the first round looks at what came before Start
	var roundAt time.Duration // when the last round began (since start)
	for {
		if wait < 0 {
			ls.asleep.Store(true)
			select {
			case <-ctx.Done():
				return
			case <-kick:
			}
			ls.asleep.Store(false)
			wait = 0
		}
		now := time.Since(start)
		at := now // the next round: the first grid point after at
		if wait > 0 {
			at = max(now, roundAt+wait) // the round measured wait from its own start
		}
		t.Reset(at + every - at%every - now)
		napKick := kick
		if wait == 0 {
			napKick = nil // at the next grid point anyway
		}
		select {
		case <-ctx.Done():
			return
		case <-napKick:
			wait = 0
			continue
		case <-t.C:
		}
		select {
		case <-kick:
		default:
		}
		roundAt = time.Since(start)
		ls.rounds.Add(1)
		wait = round(ctx)
	}
}
