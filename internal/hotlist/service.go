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
	loop(h.o.WakeTick, func(context.Context) { h.WakeTick() })
	if h.o.Reseeder != nil && h.o.ReseedInterval > 0 {
		loop(min(time.Second, h.o.ReseedInterval), func(ctx context.Context) { h.ReseedDue(ctx) })
	}
	if !h.o.DisableSweep {
		loop(h.o.SweepInterval, func(context.Context) { h.Sweep() })
	}
	if h.o.Peers != nil {
		loop(h.o.HintFlush, func(ctx context.Context) { h.FlushHints(ctx) })
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
