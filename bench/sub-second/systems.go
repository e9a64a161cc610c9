package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// system is one queue implementation under test: how to set it up for a
// phase, produce, consume, and where its metadata lives.
type system interface {
	Name() string
	DB() string
	// Prepare resets the queues for a phase and makes sure ticking runs at
	// the phase's rate.
	Prepare(ctx context.Context, conn *pgx.Conn, p Phase) error
	// Produce inserts n events in one transaction (committed) and returns their ids.
	Produce(ctx context.Context, conn *pgx.Conn, n int) ([]int64, error)
	// Consume takes what is ready for consumer and acknowledges it; returns
	// the event ids, and more = a batch was there (maybe an empty one), so
	// the consumer polls again at once; it sleeps only after a poll that
	// found no batch at all. A driver that slept after an empty batch fell
	// behind by tens of seconds at 100 Hz on systems that hand out one tick
	// per batch (PgQ, PgQue 0.2.0), which measured the driver, not the system.
	// at is when the events were received (the client's clock once the
	// receiving call returned its rows), before the acknowledgement: the
	// latency ends there, not after the ack's durable COMMIT.
	Consume(ctx context.Context, conn *pgx.Conn, consumer string) (ids []int64, at time.Time, more bool, err error)
	// Channel is the NOTIFY channel a LISTEN consumer waits on ("" = none).
	Channel() string
	// QueueID of the active queue (tick rows are keyed by it).
	QueueID(ctx context.Context, conn *pgx.Conn) (int64, error)
	// TickQuery returns (tick_id, tick_time) of ticks of queue $1 after tick id $2.
	TickQuery() string
	// MetaTables names the tick / subscription / queue tables (for pgstattuple).
	MetaTables() (tick, sub, queue string)
	// EventSchema holds the event tables (names event_*).
	EventSchema() string
	// TickerJobLike matches the command of its pg_cron ticker job ("" = none).
	TickerJobLike() string
	// Finish ends the phase (stop daemons it started).
	Finish(ctx context.Context) error
	// Close releases everything at the end of the run.
	Close(ctx context.Context) error
}

const (
	benchQueue    = "bq"
	benchConsumer = "bc"
	idleQueueFmt  = "idle_%03d"
	receiveMax    = 10000
)

// consumerName is the i-th consumer of the active queue (0 = benchConsumer).
func consumerName(i int) string {
	if i == 0 {
		return benchConsumer
	}
	return fmt.Sprintf("%s_%02d", benchConsumer, i)
}

// ---- pgque ---------------------------------------------------------------

// Named statements of the pgque driver.
const (
	pqDropQueue     = `SELECT pgque.drop_queue(queue_name, true) FROM pgque.queue`
	pqCreateQueue   = `SELECT pgque.create_queue($1)`
	pqSubscribe     = `SELECT pgque.subscribe($1, $2)`
	pqSetPeriod     = `SELECT pgque.set_tick_period_ms($1::int)`
	pqSetRotation   = `SELECT pgque.set_setting('meta_rotation_period_ms', $1::text)`
	pqSendBatch     = `SELECT unnest(pgque.send_batch($1, $2::text[]))`
	pqReceive       = `SELECT msg_id, batch_id FROM pgque.receive($1, $2, $3)`
	pqAck           = `SELECT pgque.ack($1)`
	pqQueueID       = `SELECT queue_id FROM pgque.queue WHERE queue_name = $1`
	pqTicks         = `SELECT tick_id, tick_time FROM pgque.tick WHERE tick_queue = $1 AND tick_id > $2 ORDER BY tick_id`
	pqVacuum        = `VACUUM pgque.tick, pgque.subscription, pgque.queue`
	pqSettingsReset = `SELECT pgque.set_setting('meta_rotation_period_ms', NULL)`
	// pqDebugRound turns on the loop's per-round debug log (rounds slower
	// than the value, in ms) where the engine has the setting.
	pqDebugRound = `SELECT pgque.set_setting(name, $1) FROM pgque.settings WHERE name = 'ticker_debug_round_ms'`
)

// debugRoundMs: rounds of ticker_loop() slower than this are logged by the
// engine (when it has ticker_debug_round_ms); the stall diagnostics read them.
const debugRoundMs = "50"

type pgqueSystem struct {
	db string
	// prepare, when set, runs first in Prepare (on the pg_cron 1.6 cluster:
	// make sure our jobs are registered; PgQue 0.2.0's phases pause them).
	prepare func(ctx context.Context) error
}

func (s *pgqueSystem) Name() string    { return SystemPgque }
func (s *pgqueSystem) DB() string      { return s.db }
func (s *pgqueSystem) Channel() string { return "pgque_" + benchQueue }
func (s *pgqueSystem) TickQuery() string {
	return pqTicks
}
func (s *pgqueSystem) MetaTables() (string, string, string) {
	return "pgque.tick", "pgque.subscription", "pgque.queue"
}
func (s *pgqueSystem) EventSchema() string   { return "pgque" }
func (s *pgqueSystem) TickerJobLike() string { return "%pgque.ticker_loop()%" }

func (s *pgqueSystem) Prepare(ctx context.Context, conn *pgx.Conn, p Phase) error {
	if s.prepare != nil {
		if err := s.prepare(ctx); err != nil {
			return err
		}
	}
	steps := []struct {
		what string
		sql  string
		args []any
	}{
		{"dropping old queues", pqDropQueue, nil},
		{"setting the tick period", pqSetPeriod, []any{p.Period().Milliseconds()}},
		{"setting the rotation period", pqSettingsReset, nil},
		{"turning on the round debug log", pqDebugRound, []any{debugRoundMs}},
	}
	for _, st := range steps {
		if _, err := conn.Exec(ctx, st.sql, st.args...); err != nil {
			return fmt.Errorf("pgque: %s: %w", st.what, err)
		}
	}
	if p.Rotation > 0 {
		if _, err := conn.Exec(ctx, pqSetRotation, strconv.FormatInt(p.Rotation.Milliseconds(), 10)); err != nil {
			return fmt.Errorf("pgque: setting the rotation period: %w", err)
		}
	}
	if p.Rate > 0 {
		if _, err := conn.Exec(ctx, pqCreateQueue, benchQueue); err != nil {
			return fmt.Errorf("pgque: creating the queue: %w", err)
		}
		for i := range p.Consumers {
			if _, err := conn.Exec(ctx, pqSubscribe, benchQueue, consumerName(i)); err != nil {
				return fmt.Errorf("pgque: subscribing: %w", err)
			}
		}
	}
	for i := range idleQueues(p) {
		q := fmt.Sprintf(idleQueueFmt, i)
		if _, err := conn.Exec(ctx, pqCreateQueue, q); err != nil {
			return fmt.Errorf("pgque: creating idle queue %s: %w", q, err)
		}
		if _, err := conn.Exec(ctx, pqSubscribe, q, benchConsumer); err != nil {
			return fmt.Errorf("pgque: subscribing to %s: %w", q, err)
		}
	}
	if _, err := conn.Exec(ctx, pqVacuum); err != nil {
		return fmt.Errorf("pgque: vacuum before the phase: %w", err)
	}
	return nil
}

func idleQueues(p Phase) int {
	if p.Rate > 0 {
		return 0
	}
	return p.Queues
}

func (s *pgqueSystem) Produce(ctx context.Context, conn *pgx.Conn, n int) ([]int64, error) {
	payloads := make([]string, n)
	for i := range payloads {
		payloads[i] = "{}"
	}
	rows, err := conn.Query(ctx, pqSendBatch, benchQueue, payloads)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

func (s *pgqueSystem) Consume(ctx context.Context, conn *pgx.Conn, consumer string) ([]int64, time.Time, bool, error) {
	ids, at, err := receiveAck(ctx, conn, consumer)
	// Our receive() returns every event ready (across ticks, up to
	// receiveMax) and writes nothing for an empty one: no rows = caught up.
	return ids, at, len(ids) > 0, err
}

// receiveAck runs receive() and acks the batches it returned (the SQL API
// both pgque and PgQue 0.2.0 have).
func receiveAck(ctx context.Context, conn *pgx.Conn, consumer string) ([]int64, time.Time, error) {
	rows, err := conn.Query(ctx, pqReceive, benchQueue, consumer, receiveMax)
	if err != nil {
		return nil, time.Time{}, err
	}
	var ids []int64
	batches := map[int64]bool{}
	var id, batch int64
	_, err = pgx.ForEachRow(rows, []any{&id, &batch}, func() error {
		ids = append(ids, id)
		batches[batch] = true
		return nil
	})
	at := time.Now()
	if err != nil {
		return nil, at, err
	}
	for b := range batches {
		if _, err := conn.Exec(ctx, pqAck, b); err != nil {
			return ids, at, fmt.Errorf("ack %d: %w", b, err)
		}
	}
	return ids, at, nil
}

func (s *pgqueSystem) QueueID(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var id int64
	err := conn.QueryRow(ctx, pqQueueID, benchQueue).Scan(&id)
	return id, err
}

func (s *pgqueSystem) Finish(context.Context) error { return nil }
func (s *pgqueSystem) Close(context.Context) error  { return nil }

// ---- upstream PgQ + pgqd ---------------------------------------------------

// Named statements of the PgQ driver.
const (
	pgqDropQueues  = `SELECT pgq.unregister_consumer(s.queue_name, s.consumer_name) FROM pgq.get_consumer_info() s`
	pgqDropQueue2  = `SELECT pgq.drop_queue(queue_name) FROM pgq.queue`
	pgqCreateQueue = `SELECT pgq.create_queue($1)`
	pgqQueueConfig = `SELECT pgq.set_queue_config($1, 'ticker_max_lag', $2)`
	pgqRegister    = `SELECT pgq.register_consumer($1, $2)`
	pgqInsert      = `SELECT pgq.insert_event($1, 'bench', '{}') FROM generate_series(1, $2)`
	pgqNextBatch   = `SELECT pgq.next_batch($1, $2)`
	pgqBatchEvents = `SELECT ev_id FROM pgq.get_batch_events($1)`
	pgqFinish      = `SELECT pgq.finish_batch($1)`
	pgqQueueID     = `SELECT queue_id FROM pgq.queue WHERE queue_name = $1`
	pgqTicks       = `SELECT tick_id, tick_time FROM pgq.tick WHERE tick_queue = $1 AND tick_id > $2 ORDER BY tick_id`
	pgqVacuum      = `VACUUM pgq.tick, pgq.subscription, pgq.queue`
)

type pgqSystem struct {
	db      string
	connstr string // libpq base connstr for pgqd (no dbname)
	dir     string
	cmd     *exec.Cmd
}

func (s *pgqSystem) Name() string      { return SystemPgQ }
func (s *pgqSystem) DB() string        { return s.db }
func (s *pgqSystem) Channel() string   { return "" } // PgQ has no tick NOTIFY
func (s *pgqSystem) TickQuery() string { return pgqTicks }
func (s *pgqSystem) MetaTables() (string, string, string) {
	return "pgq.tick", "pgq.subscription", "pgq.queue"
}
func (s *pgqSystem) EventSchema() string   { return "pgq" }
func (s *pgqSystem) TickerJobLike() string { return "" }

func (s *pgqSystem) Prepare(ctx context.Context, conn *pgx.Conn, p Phase) error {
	if err := s.Finish(ctx); err != nil {
		return err
	}
	for _, q := range []string{pgqDropQueues, pgqDropQueue2} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("pgq: resetting queues: %w", err)
		}
	}
	lag := fmt.Sprintf("%d ms", p.Period().Milliseconds())
	var names []string
	if p.Rate > 0 {
		names = append(names, benchQueue)
	}
	for i := range idleQueues(p) {
		names = append(names, fmt.Sprintf(idleQueueFmt, i))
	}
	for _, q := range names {
		for _, st := range []struct {
			sql  string
			args []any
		}{{pgqCreateQueue, []any{q}}, {pgqQueueConfig, []any{q, lag}}} {
			if _, err := conn.Exec(ctx, st.sql, st.args...); err != nil {
				return fmt.Errorf("pgq: preparing queue %s: %w", q, err)
			}
		}
		n := 1
		if q == benchQueue {
			n = p.Consumers
		}
		for i := range n {
			if _, err := conn.Exec(ctx, pgqRegister, q, consumerName(i)); err != nil {
				return fmt.Errorf("pgq: registering on %s: %w", q, err)
			}
		}
	}
	if _, err := conn.Exec(ctx, pgqVacuum); err != nil {
		return fmt.Errorf("pgq: vacuum before the phase: %w", err)
	}
	return s.startPgqd(p)
}

// startPgqd runs pgqd with ticker_period = the phase's period.
func (s *pgqSystem) startPgqd(p Phase) error {
	ini := filepath.Join(s.dir, "pgqd.ini")
	conf := strings.Join([]string{
		"[pgqd]",
		"logfile = " + filepath.Join(s.dir, "pgqd.log"),
		"pidfile = " + filepath.Join(s.dir, "pgqd.pid"),
		"base_connstr = " + s.connstr,
		"initial_database = " + s.db,
		"database_list = " + s.db,
		fmt.Sprintf("ticker_period = %g", p.Period().Seconds()),
		"", // maint / retry periods: pgqd defaults (120 s / 30 s)
	}, "\n")
	if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", ini, err)
	}
	_ = os.Remove(filepath.Join(s.dir, "pgqd.pid"))
	cmd := exec.Command("pgqd", ini)
	cmd.Stdout, cmd.Stderr = nil, nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting pgqd (apt-get install pgqd; scripts/setup.sh installs it): %w", err)
	}
	s.cmd = cmd
	return nil
}

func (s *pgqSystem) Produce(ctx context.Context, conn *pgx.Conn, n int) ([]int64, error) {
	rows, err := conn.Query(ctx, pgqInsert, benchQueue, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

func (s *pgqSystem) Consume(ctx context.Context, conn *pgx.Conn, consumer string) ([]int64, time.Time, bool, error) {
	var batch *int64
	if err := conn.QueryRow(ctx, pgqNextBatch, benchQueue, consumer).Scan(&batch); err != nil {
		return nil, time.Now(), false, err
	}
	if batch == nil {
		return nil, time.Now(), false, nil // no tick past ours: caught up
	}
	ids, at, err := batchEventsFinish(ctx, conn, pgqBatchEvents, pgqFinish, *batch)
	return ids, at, true, err
}

// batchEventsFinish reads a batch's events and finishes it (PgQ's
// get_batch_events / finish_batch, which PgQue 0.2.0 keeps).
func batchEventsFinish(ctx context.Context, conn *pgx.Conn, events, finish string, batch int64) ([]int64, time.Time, error) {
	rows, err := conn.Query(ctx, events, batch)
	if err != nil {
		return nil, time.Now(), err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	at := time.Now()
	if err != nil {
		return nil, at, err
	}
	if _, err := conn.Exec(ctx, finish, batch); err != nil {
		return ids, at, err
	}
	return ids, at, nil
}

func (s *pgqSystem) QueueID(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var id int64
	err := conn.QueryRow(ctx, pgqQueueID, benchQueue).Scan(&id)
	return id, err
}

// Finish stops pgqd (SIGTERM, then SIGKILL after 5 s).
func (s *pgqSystem) Finish(context.Context) error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
	return nil
}

func (s *pgqSystem) Close(ctx context.Context) error { return s.Finish(ctx) }

// killStalePgqd stops a pgqd left by an earlier interrupted run (its pidfile
// in the state directory).
func killStalePgqd(dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, "pgqd.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		return
	}
	// Only a pgqd: the pid may have been reused by another program since.
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "pgqd" {
		return
	}
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Signal(syscall.SIGTERM)
	}
}

// ---- PgQue 0.2.0 (the peer) -------------------------------------------------

// Named statements of the PgQue 0.2.0 driver. Its SQL API for sending and
// receiving is the one our engine keeps (send_batch, receive, ack), so the
// pgque driver's Produce / Consume serve it; setup and ticking differ.
const (
	p020SetPeriod = `SELECT pgque.set_tick_period_ms($1::int)`
	p020Start     = `SELECT pgque.start()`
	p020Stop      = `SELECT pgque.stop()`
	// Its ticker() ticks a queue only when ticker_max_count events or
	// ticker_max_lag of time accumulated (PgQ thresholds, 500 / 3 s by
	// default): as for PgQ + pgqd, the lag threshold is set to the period.
	p020MaxLag = `SELECT pgque.set_queue_config($1, 'ticker_max_lag', $2)`
	p020Vacuum = `VACUUM pgque.tick, pgque.subscription, pgque.queue`
	// Its receive() hands out one tick per batch and returns no rows both
	// when no batch is ready and for an empty batch (which it finishes):
	// after no rows, next_batch() tells which (its PgQ primitives).
	p020NextBatch   = `SELECT pgque.next_batch($1, $2)`
	p020BatchEvents = `SELECT ev_id FROM pgque.get_batch_events($1)`
	p020Finish      = `SELECT pgque.finish_batch($1)`
)

// pgque020System is PgQue 0.2.0 in its own database of the pg_cron 1.6
// cluster, ticked by its own pg_cron job during its phases only (our jobs
// in the other database are paused meanwhile by the run).
type pgque020System struct {
	pgqueSystem
	// connect opens a session on its database (for Finish).
	connect func(ctx context.Context) (*pgx.Conn, error)
}

func (s *pgque020System) Name() string { return SystemPgque020 }

// Consume: receive() + ack(); when receive() returned nothing, next_batch()
// says whether that was an empty batch (then more batches may be ready:
// take the next one now) or no batch (caught up: sleep).
func (s *pgque020System) Consume(ctx context.Context, conn *pgx.Conn, consumer string) ([]int64, time.Time, bool, error) {
	ids, at, err := receiveAck(ctx, conn, consumer)
	if err != nil || len(ids) > 0 {
		return ids, at, len(ids) > 0, err
	}
	var batch *int64
	if err := conn.QueryRow(ctx, p020NextBatch, benchQueue, consumer).Scan(&batch); err != nil {
		return nil, time.Now(), false, err
	}
	if batch == nil {
		return nil, time.Now(), false, nil
	}
	ids, at, err = batchEventsFinish(ctx, conn, p020BatchEvents, p020Finish, *batch)
	return ids, at, true, err
}
func (s *pgque020System) TickerJobLike() string { return "%pgque.ticker_loop()%" }

func (s *pgque020System) Prepare(ctx context.Context, conn *pgx.Conn, p Phase) error {
	if s.prepare != nil {
		if err := s.prepare(ctx); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, pqDropQueue); err != nil {
		return fmt.Errorf("pgque 0.2.0: dropping old queues: %w", err)
	}
	if p.Rate > 0 {
		for _, st := range []struct {
			sql  string
			args []any
		}{{pqCreateQueue, []any{benchQueue}}, {p020MaxLag, []any{benchQueue, fmt.Sprintf("%d ms", p.Period().Milliseconds())}}} {
			if _, err := conn.Exec(ctx, st.sql, st.args...); err != nil {
				return fmt.Errorf("pgque 0.2.0: creating the queue: %w", err)
			}
		}
		for i := range p.Consumers {
			if _, err := conn.Exec(ctx, pqSubscribe, benchQueue, consumerName(i)); err != nil {
				return fmt.Errorf("pgque 0.2.0: subscribing: %w", err)
			}
		}
	}
	for _, st := range []struct {
		sql  string
		args []any
	}{{p020SetPeriod, []any{p.Period().Milliseconds()}}, {p020Start, nil}, {p020Vacuum, nil}} {
		if _, err := conn.Exec(ctx, st.sql, st.args...); err != nil {
			return fmt.Errorf("pgque 0.2.0: %s: %w", st.sql, err)
		}
	}
	return nil
}

// Finish unschedules its pg_cron jobs (pgque.stop()).
func (s *pgque020System) Finish(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, p020Stop); err != nil {
		return fmt.Errorf("pgque 0.2.0: stop(): %w", err)
	}
	return nil
}
