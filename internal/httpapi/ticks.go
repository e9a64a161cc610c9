package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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

// tickSQL ticks one queue now unless its latest tick already sees the
// committed transactions $3 (pgque.broker_tick(queue, txids): a forced
// tick that writes no queue row, or none at all when covered; $3 NULL
// ticks unconditionally) and, in the same transaction, tells the other
// brokers which gate to open: the notification is delivered at commit,
// when the tick is visible. It returns the tick's snapshot, against which
// the pushes that committed while it ran are checked. Needs pgque_admin
// (broker_tick).
const tickSQL = `SELECT k.tick_id, k.tick_snapshot::text, k.ticked,
       CASE WHEN k.tick_id IS NOT NULL THEN pg_notify('` + notifyChannel + `', $2) END
  FROM pgque.broker_tick($1, $3::bigint[]) k`

// queueTicker ticks a queue right after a push through this broker
// committed, so the pushed messages are poppable without waiting for
// pg_cron or the ticker daemon. Requests are coalesced per queue: at most
// one tick of a queue is in flight; requests arriving meanwhile cause one
// more tick after it - unless the tick in flight already covers them: a
// push whose transaction its snapshot sees (it committed before the
// snapshot was taken) needs no tick of its own. And a tick is skipped in
// SQL when the queue's latest tick (the scheduled ticker's, say) covers
// every push waiting for it.
type queueTicker struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	origin   string
	onTicked func(queue string)
	// covers, when set, is called right before each tick call of a queue;
	// the function it returns is called when that call made a new tick
	// (the hot-list's TickCovers).
	covers func(queue string) func()

	mu      sync.Mutex
	state   map[string]*tickState // by stored queue name
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool
	// noPriv: the role may not tick (logged once).
	noPriv atomic.Bool
	// Outcomes (metric pgque_broker_ticks_total): ticks made; calls that
	// found the latest tick covering their pushes (no tick); requests
	// covered by the tick in flight (no call); calls that made no tick.
	ticked, covered, coalesced, failed atomic.Int64
}

// tickState is a queue's tick in flight: cur closes when it is done;
// dirty asks for one more, whose completion closes next. txids are the
// committed transactions that asked for that next tick, force says one
// of its requests named none (tick whatever the snapshots say).
type tickState struct {
	dirty     bool
	force     bool
	txids     []int64
	cur, next chan struct{}
}

func newQueueTicker(pool *pgxpool.Pool, log *slog.Logger, origin string, onTicked func(queue string)) *queueTicker {
	ctx, cancel := context.WithCancel(context.Background())
	return &queueTicker{pool: pool, log: log, origin: origin, onTicked: onTicked,
		state: map[string]*tickState{}, ctx: ctx, cancel: cancel}
}

// Request asks for a tick of queue (its stored name) that covers the
// committed transaction txid (0: unknown - a tick is made whatever the
// snapshots say).
func (t *queueTicker) Request(queue string, txid int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	if st := t.state[queue]; st != nil {
		st.dirty = true
		st.addTxid(txid)
		if st.next == nil {
			st.next = make(chan struct{})
		}
		return
	}
	st := &tickState{cur: make(chan struct{})}
	st.addTxid(txid)
	t.wg.Add(1)
	go t.run(queue, st.txids, st.force)
	st.txids, st.force = nil, false
	t.state[queue] = st
}

func (st *tickState) addTxid(txid int64) {
	if txid == 0 {
		st.force = true
		return
	}
	for _, x := range st.txids {
		if x == txid {
			return
		}
	}
	st.txids = append(st.txids, txid)
}

func (t *queueTicker) run(queue string, txids []int64, force bool) {
	defer t.wg.Done()
	for {
		snap := t.tick(queue, txids, force)
		t.mu.Lock()
		st := t.state[queue]
		close(st.cur)
		covered := st.dirty && !st.force && snap.seesAll(st.txids)
		if covered {
			t.coalesced.Add(1)
		}
		if !st.dirty || covered || t.stopped {
			delete(t.state, queue)
			if st.next != nil {
				close(st.next)
			}
			t.mu.Unlock()
			if covered {
				// Their messages are visible now: wake the pops that
				// parked after the tick's own wake-up.
				t.onTicked(queue)
			}
			return
		}
		txids, force = st.txids, st.force
		st.dirty, st.force, st.txids, st.cur, st.next = false, false, nil, st.next, nil
		t.mu.Unlock()
	}
}

// tick ticks queue once (or finds a tick that covers txids; force: tick
// anyway) and returns the snapshot of the tick (nil when none was made);
// a tick skipped because another session was ticking it is retried a few
// times (that tick may predate our commit).
func (t *queueTicker) tick(queue string, txids []int64, force bool) *snapshot {
	var arg []int64
	if !force {
		arg = txids
	}
	for attempt := 0; attempt < 5; attempt++ {
		var covered func()
		if t.covers != nil {
			covered = t.covers(queue)
		}
		ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
		var tickID *int64
		var snapText *string
		var ticked *bool
		err := t.pool.QueryRow(ctx, tickSQL, queue, t.origin+"\x1e"+queue, arg).Scan(&tickID, &snapText, &ticked, new(any))
		cancel()
		if err != nil {
			t.failed.Add(1)
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
			return nil
		}
		if tickID != nil {
			if ticked != nil && *ticked {
				t.ticked.Add(1)
				if covered != nil {
					covered()
				}
			} else {
				t.covered.Add(1)
			}
			t.onTicked(queue)
			if snapText == nil {
				return nil
			}
			s, err := parseSnapshot(*snapText)
			if err != nil {
				t.log.Warn("broker tick: unreadable snapshot; the next pushes tick again", "queue", queue, "snapshot", *snapText, "err", err)
				return nil
			}
			return s
		}
		select {
		case <-t.ctx.Done():
			return nil
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
	// Still not ticked: wake the waiters anyway, they re-check.
	t.failed.Add(1)
	t.onTicked(queue)
	return nil
}

// snapshot is a pg_snapshot ("xmin:xmax:xip,..."): the transactions a
// tick's batches end at.
type snapshot struct {
	xmin, xmax int64
	xip        map[int64]struct{}
}

func parseSnapshot(s string) (*snapshot, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("pg_snapshot %q: want xmin:xmax:xip", s)
	}
	var out snapshot
	var err error
	if out.xmin, err = strconv.ParseInt(parts[0], 10, 64); err != nil {
		return nil, fmt.Errorf("pg_snapshot %q: xmin: %w", s, err)
	}
	if out.xmax, err = strconv.ParseInt(parts[1], 10, 64); err != nil {
		return nil, fmt.Errorf("pg_snapshot %q: xmax: %w", s, err)
	}
	if parts[2] != "" {
		out.xip = map[int64]struct{}{}
		for _, f := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("pg_snapshot %q: xip: %w", s, err)
			}
			out.xip[x] = struct{}{}
		}
	}
	return &out, nil
}

// sees reports whether a committed transaction is visible in the
// snapshot (pg_visible_in_snapshot).
func (s *snapshot) sees(txid int64) bool {
	if txid < s.xmin {
		return true
	}
	if txid >= s.xmax {
		return false
	}
	_, running := s.xip[txid]
	return !running
}

// seesAll reports whether every txid is visible in s (false for a nil
// snapshot or no txids: nothing is known to be covered).
func (s *snapshot) seesAll(txids []int64) bool {
	if s == nil || len(txids) == 0 {
		return false
	}
	for _, x := range txids {
		if !s.sees(x) {
			return false
		}
	}
	return true
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
