package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgquectl/pgquectl/internal/db"
)

// notifyChannel is the PostgreSQL NOTIFY channel brokers on one database
// use to wake each other's parked pops. The engine's own channels are
// pgque_<queue>; a dot cannot appear after that prefix's underscore form,
// so no queue name collides with it.
const notifyChannel = "pgque.broker"

// tickSQL ticks one queue now (pgque.broker_tick: a forced tick that
// writes no queue row) and, in the same transaction, tells the other
// brokers which gate to open: the notification is delivered at commit,
// when the tick is visible. Needs pgque_admin (broker_tick).
const tickSQL = `SELECT tick, CASE WHEN tick IS NOT NULL THEN pg_notify('` + notifyChannel + `', $2) END
FROM (SELECT pgque.broker_tick($1) AS tick) k`

// queueTicker ticks a queue right after a push through this broker
// committed, so the pushed messages are poppable without waiting for
// pg_cron or the ticker daemon. Requests are coalesced per queue: at most
// one tick of a queue is in flight; requests arriving meanwhile cause one
// more tick after it.
type queueTicker struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	origin   string
	onTicked func(queue string)

	mu      sync.Mutex
	state   map[string]*tickState // by stored queue name
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool
	// noPriv: the role may not tick (logged once).
	noPriv atomic.Bool
}

// tickState is a queue's tick in flight: cur closes when it is done;
// dirty asks for one more, whose completion closes next.
type tickState struct {
	dirty     bool
	cur, next chan struct{}
}

func newQueueTicker(pool *pgxpool.Pool, log *slog.Logger, origin string, onTicked func(queue string)) *queueTicker {
	ctx, cancel := context.WithCancel(context.Background())
	return &queueTicker{pool: pool, log: log, origin: origin, onTicked: onTicked,
		state: map[string]*tickState{}, ctx: ctx, cancel: cancel}
}

// Request asks for a tick of queue (its stored name).
func (t *queueTicker) Request(queue string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	if st := t.state[queue]; st != nil {
		st.dirty = true
		if st.next == nil {
			st.next = make(chan struct{})
		}
		return
	}
	t.state[queue] = &tickState{cur: make(chan struct{})}
	t.wg.Add(1)
	go t.run(queue)
}

func (t *queueTicker) run(queue string) {
	defer t.wg.Done()
	for {
		t.tick(queue)
		t.mu.Lock()
		st := t.state[queue]
		close(st.cur)
		if !st.dirty || t.stopped {
			delete(t.state, queue)
			if st.next != nil {
				close(st.next)
			}
			t.mu.Unlock()
			return
		}
		st.dirty, st.cur, st.next = false, st.next, nil
		t.mu.Unlock()
	}
}

// tick ticks queue once; a tick skipped because another session was
// ticking it is retried a few times (that tick may predate our commit).
func (t *queueTicker) tick(queue string) {
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
		var tickID *int64
		err := t.pool.QueryRow(ctx, tickSQL, queue, t.origin+"\x1e"+queue).Scan(&tickID, new(any))
		cancel()
		if err != nil {
			switch {
			case t.ctx.Err() != nil:
			case errors.Is(db.MapError(err), db.ErrPrivilege):
				if !t.noPriv.Swap(true) {
					t.log.Warn("broker ticks need the pgque_admin role (broker_tick); pushed messages wait for the scheduled ticker (grant pgque_admin, or pass --no-auto-tick to silence this)", "err", err)
				}
			default:
				t.log.Warn("broker tick failed; the scheduled ticker will make the messages visible", "queue", queue, "err", err)
			}
			t.onTicked(queue)
			return
		}
		if tickID != nil {
			t.onTicked(queue)
			return
		}
		select {
		case <-t.ctx.Done():
			return
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
	// Still not ticked: wake the waiters anyway, they re-check.
	t.onTicked(queue)
}

// Barrier returns a channel closed once every tick requested so far for
// queue is done (nil when none is in flight): a push is answered once its
// tick is done (awaitTicks).
func (t *queueTicker) Barrier(queue string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.state[queue]
	switch {
	case st == nil:
		return nil
	case st.dirty:
		return st.next
	default:
		return st.cur
	}
}

// Stop stops accepting requests and lets the ticks in flight finish (so
// the last pushes become visible) until ctx ends; then it cancels them.
func (t *queueTicker) Stop(ctx context.Context) error {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	defer t.cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.cancel()
		<-done
		return ctx.Err()
	}
}
