package sql_test

// A randomized concurrency test of the engine's whole contract: producers in
// READ COMMITTED, REPEATABLE READ and SERIALIZABLE (some holding their
// transaction open across ticks and event-table switches, some rolling
// back), an unrelated long transaction in another database, ticks every
// 10 ms, event-table and metadata rotation forced often, consumers with
// small receive limits that repeat acks and nack with short retry delays.
// Asserts: every committed event is delivered exactly once to each
// consumer (retries counted separately: each nack exactly one redelivery),
// nothing from a rolled-back transaction is delivered, and no committed
// event waits more than 2 s after its commit (a retry: after its due time).
// The seed is logged; PGQUE_TEST_SEED=<n> replays one.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

const (
	concProduce  = 12 * time.Second
	concMaxWait  = 2 * time.Second  // commit -> a tick that sees it (10 ms period)
	concMaxLag   = 10 * time.Second // commit (retry: due time) -> delivery, consumer lag included
	concDrainFor = 20 * time.Second
)

type concState struct {
	mu        sync.Mutex
	committed map[string]time.Time // payload -> when its COMMIT returned
	txid      map[string]uint64    // payload -> its transaction's id
	how       map[string]string    // payload -> isolation and hold, for failure messages
	ticks     []seenTick           // every tick of q, in order, when the ticker saw it committed
	rolled    map[string]bool
	// per consumer: payload -> deliveries with retry_count 0 / 1
	first, retried map[string]map[string]int
	firstAt        map[string]map[string]time.Time
	nacked         map[string]time.Time // c2: payload -> retry due time
	retryLate      map[string]time.Duration
}

func (s *concState) lock() func() { s.mu.Lock(); return s.mu.Unlock }

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

func TestConcurrencyRandomized(t *testing.T) {
	e := setup(t)
	seed := time.Now().UnixNano()
	if v := os.Getenv("PGQUE_TEST_SEED"); v != "" {
		seed, _ = strconv.ParseInt(v, 10, 64)
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
	consumers := []string{"c1", "c2"}
	for _, c := range consumers {
		e.exec(`SELECT pgque.subscribe('q', $1)`, c)
	}
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.exec(`SELECT pgque.set_setting('meta_rotation_period_ms', '100')`)
	e.exec(`SELECT pgque.set_setting('meta_rotation_max_pages', '1')`)
	e.exec(`SELECT pgque.ticker()`)

	st := &concState{
		committed: map[string]time.Time{}, txid: map[string]uint64{}, how: map[string]string{}, rolled: map[string]bool{},
		first: map[string]map[string]int{}, retried: map[string]map[string]int{},
		firstAt: map[string]map[string]time.Time{}, nacked: map[string]time.Time{},
		retryLate: map[string]time.Duration{},
	}
	for _, c := range consumers {
		st.first[c], st.retried[c], st.firstAt[c] = map[string]int{}, map[string]int{}, map[string]time.Time{}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()
	produceCtx, stopProducing := context.WithTimeout(ctx, concProduce)
	defer stopProducing()
	bgCtx, stopBackground := context.WithCancel(ctx)
	defer stopBackground()

	errs := make(chan error, 100)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	var bg, prod sync.WaitGroup

	// The ticker: pgque.ticker() every 10 ms.
	bg.Add(1)
	go func(conn *pgx.Conn) {
		defer bg.Done()
		last := int64(0)
		for next := time.Now(); bgCtx.Err() == nil; {
			if _, err := conn.Exec(bgCtx, `SELECT pgque.ticker()`); err != nil && bgCtx.Err() == nil {
				report(fmt.Errorf("ticker: %w", err))
				return
			}
			rows, err := conn.Query(bgCtx, `SELECT tick_id, tick_snapshot::text FROM pgque.tick WHERE tick_queue = 1 AND tick_id > $1 ORDER BY tick_id`, last)
			if err == nil {
				var id int64
				var snap string
				now := time.Now()
				_, err = pgx.ForEachRow(rows, []any{&id, &snap}, func() error {
					last = id
					tk, err := parseSnapshot(snap)
					tk.at = now
					unlock := st.lock()
					st.ticks = append(st.ticks, tk)
					unlock()
					return err
				})
			}
			if err != nil && bgCtx.Err() == nil {
				report(fmt.Errorf("reading ticks: %w", err))
				return
			}
			next = next.Add(10 * time.Millisecond)
			time.Sleep(time.Until(next))
		}
	}(pgtest.Conn(t, e.dsn))

	// Rotation, forced often: event tables (step 1 / step 2 in separate
	// transactions) and the tick / subscription tables.
	bg.Add(1)
	go func(conn *pgx.Conn, rng *rand.Rand) {
		defer bg.Done()
		for bgCtx.Err() == nil {
			for _, q := range []string{`SELECT pgque.maint_rotate_tables_step1('q')`, `SELECT pgque.maint_rotate_tables_step2()`, `SELECT pgque.rotate_metadata()`} {
				if _, err := conn.Exec(bgCtx, q); err != nil && bgCtx.Err() == nil {
					report(fmt.Errorf("%s: %w", q, err))
					return
				}
			}
			time.Sleep(time.Duration(20+rng.Intn(60)) * time.Millisecond)
		}
	}(pgtest.Conn(t, e.dsn), rand.New(rand.NewSource(master.Int63())))

	// An unrelated long transaction with an xid in another database, held
	// for seconds at a time (always holding it would stop table switches).
	bg.Add(1)
	go func(conn *pgx.Conn, rng *rand.Rand) {
		defer bg.Done()
		for bgCtx.Err() == nil {
			tx, err := conn.Begin(bgCtx)
			if err != nil {
				return
			}
			if _, err := tx.Exec(bgCtx, `SELECT pg_current_xact_id()`); err != nil {
				_ = tx.Rollback(context.Background())
				return
			}
			sleepCtx(bgCtx, time.Duration(1500+rng.Intn(3000))*time.Millisecond)
			_ = tx.Commit(context.Background())
			sleepCtx(bgCtx, time.Duration(200+rng.Intn(1000))*time.Millisecond)
		}
	}(pgtest.Conn(t, pgtest.NewEmptyDB(t)), rand.New(rand.NewSource(master.Int63())))

	// Producers.
	isos := []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable}
	for p := 0; p < 6; p++ {
		prod.Add(1)
		go func(p int, conn *pgx.Conn, rng *rand.Rand) {
			defer prod.Done()
			for n := 0; produceCtx.Err() == nil; n++ {
				iso := isos[rng.Intn(len(isos))]
				var payloads []string
				for k := 0; k < 1+rng.Intn(3); k++ {
					payloads = append(payloads, fmt.Sprintf("p%d-%d-%d", p, n, k))
				}
				hold := time.Duration(0)
				if rng.Intn(4) == 0 { // open across ticks, maybe a table switch
					hold = time.Duration(30+rng.Intn(400)) * time.Millisecond
				}
				rollback := rng.Intn(8) == 0
				txid, err := produce(ctx, conn, iso, payloads, hold, rollback, rng)
				done := time.Now()
				unlock := st.lock()
				for _, pl := range payloads {
					if err == nil && !rollback {
						st.committed[pl] = done
						st.txid[pl] = txid
						st.how[pl] = fmt.Sprintf("%s, held %v", iso, hold)
					} else {
						st.rolled[pl] = true
					}
				}
				unlock()
				if err != nil && !retryable(err) && ctx.Err() == nil {
					report(fmt.Errorf("producer %d (%s): %w", p, iso, err))
					return
				}
				time.Sleep(time.Duration(rng.Intn(40)) * time.Millisecond)
			}
		}(p, pgtest.Conn(t, e.dsn), rand.New(rand.NewSource(master.Int63())))
	}

	// Consumers: one reader per consumer name.
	for i, c := range consumers {
		bg.Add(1)
		go func(c string, nacker bool, conn *pgx.Conn, rng *rand.Rand) {
			defer bg.Done()
			for bgCtx.Err() == nil {
				ms, err := receiveCtx(bgCtx, conn, c, 1+rng.Intn(5))
				if err != nil {
					if bgCtx.Err() == nil {
						report(fmt.Errorf("receive %s: %w", c, err))
					}
					return
				}
				now := time.Now()
				if len(ms) == 0 {
					time.Sleep(3 * time.Millisecond)
					continue
				}
				for _, m := range ms {
					unlock := st.lock()
					switch m.Retry {
					case 0:
						st.first[c][m.Payload]++
						if _, ok := st.firstAt[c][m.Payload]; !ok {
							st.firstAt[c][m.Payload] = now
						}
					default:
						st.retried[c][m.Payload]++
						if due, ok := st.nacked[m.Payload]; ok && c == "c2" {
							st.retryLate[m.Payload] = now.Sub(due)
						}
					}
					unlock()
					if nacker && m.Retry == 0 && rng.Intn(8) == 0 {
						delay := []time.Duration{0, 50 * time.Millisecond, 300 * time.Millisecond}[rng.Intn(3)]
						unlock := st.lock()
						st.nacked[m.Payload] = time.Now().Add(delay)
						unlock()
						if _, err := conn.Exec(bgCtx, `SELECT pgque.nack($1, ROW($2, $1, 'default', '', 0, now(), NULL, NULL, NULL, NULL)::pgque.message, $3::interval, 'test')`,
							m.Batch, m.ID, fmt.Sprintf("%d milliseconds", delay.Milliseconds())); err != nil {
							if bgCtx.Err() == nil {
								report(fmt.Errorf("nack %s: %w", c, err))
							}
							return
						}
					}
				}
				for k := 0; k < 1+rng.Intn(2); k++ { // sometimes the ack is repeated
					if _, err := conn.Exec(bgCtx, `SELECT pgque.ack($1)`, ms[0].Batch); err != nil {
						if bgCtx.Err() == nil {
							report(fmt.Errorf("ack %s: %w", c, err))
						}
						return
					}
				}
			}
		}(c, i == 1, pgtest.Conn(t, e.dsn), rand.New(rand.NewSource(master.Int63())))
	}

	prod.Wait()
	// Drain: until every committed event and every nacked one came back.
	deadline := time.Now().Add(concDrainFor)
	for time.Now().Before(deadline) {
		if len(errs) > 0 {
			break
		}
		unlock := st.lock()
		missing := 0
		for pl := range st.committed {
			for _, c := range consumers {
				if st.first[c][pl] == 0 {
					missing++
				}
			}
		}
		for pl := range st.nacked {
			if st.retried["c2"][pl] == 0 {
				missing++
			}
		}
		unlock()
		if missing == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let duplicates, if any, show up
	stopBackground()
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// The contract.
	unlock := st.lock()
	defer unlock()
	if len(st.committed) < 100 {
		t.Errorf("only %d events committed: the test exercised too little", len(st.committed))
	}
	t.Logf("%d events committed, %d rolled back, %d nacked", len(st.committed), len(st.rolled), len(st.nacked))
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var waits, lags []time.Duration
	for pl, at := range st.committed {
		// The ticker's property: the first tick that sees the event's
		// transaction comes within concMaxWait of its commit.
		x := st.txid[pl]
		i := sort.Search(len(st.ticks), func(i int) bool { return st.ticks[i].visible(x) })
		if i == len(st.ticks) {
			add("committed event %s (txid %d) is visible in no tick", pl, x)
		} else {
			w := st.ticks[i].at.Sub(at)
			waits = append(waits, w)
			if w > concMaxWait {
				add("committed event %s (txid %d) waited %v after its commit for a tick that sees it (limit %v)", pl, x, w.Round(time.Millisecond), concMaxWait)
			}
		}
		for _, c := range consumers {
			switch n := st.first[c][pl]; {
			case n == 0:
				add("%s: committed event %s (%s) never delivered", c, pl, st.how[pl])
			case n > 1:
				add("%s: committed event %s (%s) delivered %d times", c, pl, st.how[pl], n)
			default:
				// End to end, consumer lag included: a generous bound.
				w := st.firstAt[c][pl].Sub(at)
				lags = append(lags, w)
				if w > concMaxLag {
					add("%s: committed event %s delivered %v after its commit (limit %v)", c, pl, w.Round(time.Millisecond), concMaxLag)
				}
			}
		}
	}
	for pl := range st.rolled {
		for _, c := range consumers {
			if n := st.first[c][pl] + st.retried[c][pl]; n > 0 {
				add("%s: rolled-back event %s delivered %d times", c, pl, n)
			}
		}
	}
	for pl := range st.nacked {
		if n := st.retried["c2"][pl]; n != 1 {
			add("c2: nacked event %s redelivered %d times, want once", pl, n)
		} else if late := st.retryLate[pl]; late > concMaxLag {
			add("c2: nacked event %s redelivered %v after its due time (limit %v)", pl, late.Round(time.Millisecond), concMaxLag)
		}
	}
	for pl, n := range st.retried["c1"] {
		add("c1: got a retry of %s (%d times) it never nacked", pl, n)
	}
	for pl := range st.first["c1"] {
		if _, ok := st.committed[pl]; !ok && !st.rolled[pl] {
			add("c1: delivered unknown payload %s", pl)
		}
	}
	// Where lost events are (best effort: the table may have been reused).
	lost := 0
	for pl := range st.committed {
		if st.first["c1"][pl] != 0 || lost == 5 {
			continue
		}
		lost++
		var where string
		if err := e.conn.QueryRow(ctxT(t), `
			SELECT coalesce(string_agg(format('%s (ev_txid %s)', t, x), ', '), 'no event table') || format('; queue_cur_table %s, switch_step1 %s, switch_step2 %s',
			       q.queue_cur_table, q.queue_switch_step1, q.queue_switch_step2)
			  FROM pgque.queue q
			  LEFT JOIN (SELECT 'event_1_0' t, ev_txid x FROM pgque.event_1_0 WHERE ev_data = $1
			             UNION ALL SELECT 'event_1_1', ev_txid FROM pgque.event_1_1 WHERE ev_data = $1
			             UNION ALL SELECT 'event_1_2', ev_txid FROM pgque.event_1_2 WHERE ev_data = $1) r ON true
			 WHERE q.queue_id = 1
			 GROUP BY q.queue_cur_table, q.queue_switch_step1, q.queue_switch_step2`, pl).Scan(&where); err != nil {
			where = err.Error()
		}
		add("lost event %s (%s): in %s", pl, st.how[pl], where)
	}
	sort.Strings(problems)
	for i, p := range problems {
		if i == 30 {
			t.Errorf("... and %d more", len(problems)-30)
			break
		}
		t.Error(p)
	}
	logDist(t, "commit to first tick that sees it", waits)
	logDist(t, "commit to delivery", lags)
}

func logDist(t *testing.T, what string, ds []time.Duration) {
	t.Helper()
	if len(ds) == 0 {
		return
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	t.Logf("%s: median %v, p99 %v, max %v", what, ds[len(ds)/2].Round(time.Millisecond),
		ds[len(ds)*99/100].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}

// seenTick is a tick's snapshot and when the test saw it committed.
type seenTick struct {
	at         time.Time
	xmin, xmax uint64
	xip        map[uint64]bool
}

func parseSnapshot(s string) (seenTick, error) {
	var tk seenTick
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return tk, fmt.Errorf("bad snapshot %q", s)
	}
	var err1, err2 error
	tk.xmin, err1 = strconv.ParseUint(parts[0], 10, 64)
	tk.xmax, err2 = strconv.ParseUint(parts[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return tk, fmt.Errorf("bad snapshot %q: %w", s, err)
	}
	tk.xip = map[uint64]bool{}
	for _, x := range strings.Split(parts[2], ",") {
		if x == "" {
			continue
		}
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return tk, fmt.Errorf("bad snapshot %q: %w", s, err)
		}
		tk.xip[v] = true
	}
	return tk, nil
}

// visible is pg_visible_in_snapshot.
func (tk seenTick) visible(x uint64) bool {
	return x < tk.xmin || (x < tk.xmax && !tk.xip[x])
}

// produce sends payloads in one transaction of the given isolation, holding
// it open for hold before committing (or rolling back).
func produce(ctx context.Context, conn *pgx.Conn, iso pgx.TxIsoLevel, payloads []string, hold time.Duration, rollback bool, rng *rand.Rand) (uint64, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil { // RR/SERIALIZABLE: the snapshot is taken now
		return 0, err
	}
	if hold > 0 && rng.Intn(2) == 0 {
		sleepCtx(ctx, hold) // the snapshot ages across ticks / switches before the send
	}
	if len(payloads) > 1 && rng.Intn(2) == 0 {
		if _, err := tx.Exec(ctx, `SELECT pgque.send_batch('q', $1::text[])`, payloads); err != nil {
			return 0, err
		}
	} else {
		for _, pl := range payloads {
			if _, err := tx.Exec(ctx, `SELECT pgque.send('q', $1::text)`, pl); err != nil {
				return 0, err
			}
		}
	}
	var txid uint64
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&txid); err != nil {
		return 0, err
	}
	if hold > 0 {
		sleepCtx(ctx, hold)
	}
	if rollback {
		return 0, tx.Rollback(ctx)
	}
	return txid, tx.Commit(ctx)
}

func receiveCtx(ctx context.Context, conn *pgx.Conn, c string, max int) ([]msg, error) {
	rows, err := conn.Query(ctx, `SELECT msg_id, batch_id, payload, retry_count FROM pgque.receive('q', $1, $2)`, c, max)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (msg, error) {
		var m msg
		err := r.Scan(&m.ID, &m.Batch, &m.Payload, &m.Retry)
		return m, err
	})
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
