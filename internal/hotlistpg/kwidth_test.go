package hotlistpg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/db"
	"github.com/pgquectl/pgquectl/internal/hotlist"
	"github.com/pgquectl/pgquectl/internal/hotlistpg"
	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// timed is a Querier that sums the time spent in database calls.
type timed struct {
	q     broker.Querier
	ns    atomic.Int64
	calls atomic.Int64
}

func (t *timed) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	s := time.Now()
	defer func() { t.ns.Add(int64(time.Since(s))); t.calls.Add(1) }()
	return t.q.Exec(ctx, sql, args...)
}

func (t *timed) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	s := time.Now()
	rows, err := t.q.Query(ctx, sql, args...)
	if err != nil {
		t.ns.Add(int64(time.Since(s)))
		t.calls.Add(1)
		return rows, err
	}
	return &timedRows{Rows: rows, t: t, s: s}, nil
}

func (t *timed) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.q.QueryRow(ctx, sql, args...)
}

type timedRows struct {
	pgx.Rows
	t    *timed
	s    time.Time
	done bool
}

func (r *timedRows) Close() {
	r.Rows.Close()
	if !r.done {
		r.done = true
		r.t.ns.Add(int64(time.Since(r.s)))
		r.t.calls.Add(1)
	}
}

// TestKWidth measures the check-out width policies against real
// PostgreSQL: 1,000 partitions, 10 or 100 of them hot (2,000 messages),
// 8 concurrent consumers popping batches of 10 from one partition with
// auto-ack until the hot partitions are drained: pops/s and database time
// per pop. Numbers only (docs/design/hotlist.md); set PGQUE_KWIDTH=1 to run it.
func TestKWidth(t *testing.T) {
	if os.Getenv("PGQUE_KWIDTH") != "1" {
		t.Skip("measurement: set PGQUE_KWIDTH=1")
	}
	for _, hot := range []int{10, 100} {
		for _, w := range []hotlist.Width{hotlist.WidthNarrow, hotlist.WidthWide} {
			name := map[hotlist.Width]string{hotlist.WidthNarrow: "narrow", hotlist.WidthWide: "wide"}[w]
			t.Run(fmt.Sprintf("hot=%d/%s", hot, name), func(t *testing.T) { kwidth(t, hot, w) })
		}
	}
}

func kwidth(t *testing.T, hot int, w hotlist.Width) {
	const (
		parts     = 1000
		total     = 2000
		consumers = 8
	)
	dsn := pgtest.NewDB(t)
	ctx := ctxT(t)
	pool, err := db.NewPool(ctx, config.Connection{DSN: dsn + "&pool_max_conns=12", ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tick := func() {
		if _, err := pool.Exec(ctx, `WITH f AS MATERIALIZED (SELECT pgque.force_next_tick('k') AS t) SELECT pgque.ticker('k') FROM f`); err != nil {
			t.Fatal(err)
		}
	}
	var items []broker.Item
	for i := range parts {
		items = append(items, broker.Item{Queue: "k", Partition: fmt.Sprintf("p%04d", i), Payload: json.RawMessage(`0`)})
	}
	if _, err := broker.Push(ctx, pool, items); err != nil {
		t.Fatal(err)
	}
	tick()
	tq := &timed{q: pool}
	src := hotlistpg.New(hotlistpg.Config{DB: pool, Options: hotlist.Options{Width: w, LogInterval: -1}})
	src.Start(ctx)
	defer func() { _ = src.Stop(context.Background()) }()
	pop := broker.Pop{Queue: "k", Group: "g", Batch: 10, MaxPartitions: 1, AutoAck: true}
	if res, err := src.Pop(ctx, pool, pop); err != nil || len(res.Messages) != 0 {
		t.Fatalf("subscribing pop: %+v %v", res, err)
	}
	items = items[:0]
	for i := range total {
		items = append(items, broker.Item{Queue: "k", Partition: fmt.Sprintf("p%04d", (i%hot)*(parts/hot)), Payload: json.RawMessage(`1`)})
	}
	res, err := broker.Push(ctx, pool, items)
	if err != nil {
		t.Fatal(err)
	}
	tick()
	ids := make([]int32, len(res))
	for i, r := range res {
		ids[i] = r.PartitionID
	}
	src.Note(broker.Event{Kind: broker.EventPushed, Queue: "k", Partitions: ids})

	var got, pops, empty atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idle := 0
			for got.Load() < total && idle < 200 {
				r, err := src.Pop(ctx, tq, pop)
				if err != nil {
					t.Error(err)
					return
				}
				pops.Add(1)
				if len(r.Messages) == 0 {
					empty.Add(1)
					idle++
					time.Sleep(5 * time.Millisecond)
					continue
				}
				idle = 0
				got.Add(int64(len(r.Messages)))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if got.Load() != total {
		t.Fatalf("got %d of %d", got.Load(), total)
	}
	st := src.HotList().Stats()
	full := pops.Load() - empty.Load()
	t.Logf("hot=%d width=%v: %d messages in %v: %.0f msg/s, %d pops with messages (%.0f/s), %d empty; db time per pop %.2f ms (%d calls); verdicts took=%d empty=%d leased=%d none=%d",
		hot, w, total, el.Round(time.Millisecond), float64(total)/el.Seconds(), full, float64(full)/el.Seconds(), empty.Load(),
		float64(tq.ns.Load())/float64(max(tq.calls.Load(), 1))/1e6, tq.calls.Load(), st.Took, st.Empty, st.Leased, st.NoVerdict)
}
