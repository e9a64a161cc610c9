package sql_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Dead-tuple bounds under a held xmin (docs/design/engine.md, "Tables and why they
// look that way"), measured exactly with pgstattuple.
const (
	maxDeadSubscription = 500
	maxDeadTick         = 200
)

// qDeadChildren: exact dead tuples of each child of a partitioned table.
const qDeadChildren = `
SELECT coalesce(array_agg((pgstattuple(i.inhrelid)).dead_tuple_count ORDER BY c.relname), '{}')
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = $1::regclass`

// qDeadEvents: exact dead tuples of all event tables of queue $1.
const qDeadEvents = `
SELECT coalesce(sum((pgstattuple(c.oid)).dead_tuple_count), 0)::bigint
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'pgque' AND c.relkind = 'r'
   AND c.relname LIKE 'event\_' || (SELECT queue_id FROM pgque.queue WHERE queue_name = $1) || '\_%'`

// TestRotationUnderBusyConsumers: 16 consumers each polling receive → ack
// about every millisecond on their own connections, a producer at ~800
// events/s, pgque.ticker_loop() ticking every 10 ms (and rotating as it
// does), and a REPEATABLE READ transaction holding the xmin horizon the whole
// time. Sampled every 250 ms, the subscription and tick tables stay within
// their dead-tuple bounds, event tables have none, and every consumer gets
// every event exactly once. A rotation that consumers starve (lock timeouts)
// or that runs too rarely for the update rate lets the subscription child
// grow by thousands of dead tuples.
func TestRotationUnderBusyConsumers(t *testing.T) {
	e := setup(t)
	const (
		queue     = "rot"
		consumers = 16
		load      = 20 * time.Second
		sample    = 250 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	e.exec(`CREATE EXTENSION IF NOT EXISTS pgstattuple`)
	e.exec(`SELECT pgque.create_queue($1)`, queue)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	for i := range consumers {
		e.exec(`SELECT pgque.subscribe($1, $2)`, queue, "c"+strconv.Itoa(i))
	}
	e.exec(`SELECT pgque.set_setting('ticker_slot_seconds', '60'), pgque.set_setting('ticker_overrun_ms', '0')`)
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, e.dsn)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}

	// The held xmin: a REPEATABLE READ snapshot that touches no pgque table
	// (a lock on one would block its truncate, which is not what we test).
	holder := connect()
	if _, err := holder.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ`); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	if n := e.int64(`SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND backend_xmin IS NOT NULL`, holder.PgConn().PID()); n != 1 {
		t.Fatalf("the REPEATABLE READ session holds no xmin (%d)", n)
	}

	var wg sync.WaitGroup
	errs := make(chan error, consumers+4)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()

	// The ticker: the real loop, called again whenever a run ends.
	loopConn := connect()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for runCtx.Err() == nil {
			if _, err := loopConn.Exec(ctx, `CALL pgque.ticker_loop()`); err != nil {
				errs <- fmt.Errorf("ticker_loop: %w", err)
				return
			}
		}
	}()

	// Consumers: receive → ack, then ~1 ms pause, until told to stop and
	// then until they have everything the producer sent.
	got := make([]map[int64]int, consumers)
	distinct := make([]atomic.Int64, consumers)
	var sent int64
	var sentMu sync.Mutex
	consDone := make(chan struct{})
	var cwg sync.WaitGroup
	for i := range consumers {
		got[i] = map[int64]int{}
		conn := connect()
		name := "c" + strconv.Itoa(i)
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for {
				select {
				case <-consDone:
					return
				default:
				}
				rows, err := conn.Query(ctx, `SELECT batch_id, payload FROM pgque.receive($1, $2, 10000)`, queue, name)
				if err != nil {
					errs <- fmt.Errorf("receive %s: %w", name, err)
					return
				}
				var batch int64
				n := 0
				for rows.Next() {
					var p string
					if err := rows.Scan(&batch, &p); err != nil {
						errs <- err
						return
					}
					seq, _ := strconv.ParseInt(p, 10, 64)
					got[i][seq]++
					if got[i][seq] == 1 {
						distinct[i].Add(1)
					}
					n++
				}
				if err := rows.Err(); err != nil {
					errs <- fmt.Errorf("receive %s: %w", name, err)
					return
				}
				if n > 0 {
					var acked int
					if err := conn.QueryRow(ctx, `SELECT pgque.ack($1)`, batch).Scan(&acked); err != nil {
						errs <- fmt.Errorf("ack %s: %w", name, err)
						return
					}
					if acked != 1 {
						errs <- fmt.Errorf("ack %s batch %d returned %d", name, batch, acked)
						return
					}
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}

	// Producer: 8 events every 10 ms.
	prodConn := connect()
	prodCtx, stopProd := context.WithTimeout(runCtx, load)
	defer stopProd()
	prodDone := make(chan struct{}) // the last send_batch has returned
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(prodDone)
		var seq int64
		for tk := time.NewTicker(10 * time.Millisecond); prodCtx.Err() == nil; <-tk.C {
			payloads := make([]string, 8)
			for j := range payloads {
				seq++
				payloads[j] = strconv.FormatInt(seq, 10)
			}
			if _, err := prodConn.Exec(ctx, `SELECT pgque.send_batch($1, $2::text[])`, queue, payloads); err != nil {
				errs <- fmt.Errorf("send_batch: %w", err)
				return
			}
			sentMu.Lock()
			sent = seq
			sentMu.Unlock()
		}
	}()

	// Sampler.
	mon := connect()
	type peak struct{ sub, tick, ev int64 }
	var pk peak
	var subTrace []string
	gen0 := e.int64(`SELECT coalesce(pg_sequence_last_value('pgque.subscription_gen_seq'), 0)`)
	start := time.Now()
	for tk := time.NewTicker(sample); prodCtx.Err() == nil; <-tk.C {
		var sub, tick []int64
		var ev int64
		if err := mon.QueryRow(ctx, qDeadChildren, "pgque.subscription").Scan(&sub); err != nil {
			t.Fatalf("pgstattuple: %v", err)
		}
		if err := mon.QueryRow(ctx, qDeadChildren, "pgque.tick").Scan(&tick); err != nil {
			t.Fatalf("pgstattuple: %v", err)
		}
		if err := mon.QueryRow(ctx, qDeadEvents, queue).Scan(&ev); err != nil {
			t.Fatalf("pgstattuple: %v", err)
		}
		s, k := sum(sub), sum(tick)
		pk.sub, pk.tick, pk.ev = max(pk.sub, s), max(pk.tick, k), max(pk.ev, ev)
		subTrace = append(subTrace, fmt.Sprintf("%.2fs sub%v tick%v", time.Since(start).Seconds(), sub, tick))
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	elapsed := time.Since(start)
	rotations := e.int64(`SELECT coalesce(pg_sequence_last_value('pgque.subscription_gen_seq'), 0)`) - gen0
	<-prodCtx.Done()
	// A send_batch in flight at the deadline still commits (it runs on ctx):
	// count it before taking the total.
	<-prodDone

	// Drain: every consumer gets every event (generous: a loaded machine).
	sentMu.Lock()
	total := sent
	sentMu.Unlock()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		done := true
		for i := range consumers {
			done = done && distinct[i].Load() >= total
		}
		if done {
			break
		}
	}
	close(consDone)
	cwg.Wait()
	e.exec(`SELECT pgque.set_setting('ticker_loop_enabled', 'false')`)
	stopRun()
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	t.Logf("%d events, %.1fs: peak dead tuples subscription %d (bound %d), tick %d (bound %d), event %d; %d subscription rotations (%.1f/s)",
		total, elapsed.Seconds(), pk.sub, maxDeadSubscription, pk.tick, maxDeadTick, pk.ev, rotations, float64(rotations)/elapsed.Seconds())
	if pk.sub > maxDeadSubscription || pk.tick > maxDeadTick || pk.ev != 0 {
		for _, l := range subTrace {
			t.Log(l)
		}
		t.Errorf("peak dead tuples: subscription %d (bound %d), tick %d (bound %d), event tables %d (want 0)",
			pk.sub, maxDeadSubscription, pk.tick, maxDeadTick, pk.ev)
	}
	for i := range consumers {
		missing, dups := 0, 0
		for seq := int64(1); seq <= total; seq++ {
			switch got[i][seq] {
			case 0:
				missing++
			case 1:
			default:
				dups++
			}
		}
		if missing != 0 || dups != 0 || int64(len(got[i])) != total {
			t.Errorf("consumer c%d: %d of %d events missing, %d delivered more than once, %d distinct", i, missing, total, dups, len(got[i]))
		}
	}
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}
