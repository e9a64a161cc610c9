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
	demand := func(every time.Duration, kick <-chan struct{}, round func(context.Context) bool) {
		if every <= 0 {
			return
		}
		h.svc.wg.Add(1)
		go func() {
			defer h.svc.wg.Done()
			demandLoop(ctx, every, kick, round)
		}()
	}
	demand(h.o.WakeTick, h.wake.kick, func(context.Context) bool {
		h.st.wakeRounds.Add(1)
		_, busy := h.wakeRound()
		return busy
	})
	if h.o.Reseeder != nil && h.o.ReseedInterval > 0 {
		loop(min(time.Second, h.o.ReseedInterval), func(ctx context.Context) { h.ReseedDue(ctx) })
	}
	if !h.o.DisableSweep {
		loop(h.o.SweepInterval, func(context.Context) { h.Sweep() })
	}
	if h.o.Peers != nil {
		demand(h.o.HintFlush, h.hints.kick, func(ctx context.Context) bool {
			h.st.hintRounds.Add(1)
			h.FlushHints(ctx)
			return h.hints.len() > 0
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

// demandLoop calls round every `every` while it reports more work (true),
// and after a round that reports none sleeps until kick receives. Rounds
// fall on the grid of a ticker started with the loop, so while there is
// work the timing is the free-running ticker's, and the first round after
// an idle stretch comes at the next grid point (marks still coalesce for
// up to one period). The kickers change their state first and kick
// after (non-blocking, buffer 1); a kick that arrives before a round is
// consumed just before it (the round sees that state), one that arrives
// after stays buffered, so the loop never sleeps on a kicked change.
func demandLoop(ctx context.Context, every time.Duration, kick <-chan struct{}, round func(context.Context) bool) {
	start := time.Now()
	t := time.NewTimer(every)
	defer t.Stop()
	busy := true // the first round looks at what came before Start
	for {
		if !busy {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			}
			t.Reset(every - time.Since(start)%every)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case <-kick:
		default:
		}
		busy = round(ctx)
		if busy {
			t.Reset(every - time.Since(start)%every)
		}
	}
}
