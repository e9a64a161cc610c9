package pgstats

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/db"
)

// QueueInfo is one row of pgque.get_queue_info(): a queue's configuration
// and ticking state.
type QueueInfo struct {
	Name             string     `json:"queue_name"`
	NTables          int32      `json:"queue_ntables"`
	CurTable         int32      `json:"queue_cur_table"`
	RotationPeriod   float64    `json:"queue_rotation_period_s"`
	SwitchTime       *time.Time `json:"queue_switch_time"` // last event-table rotation
	ExternalTicker   bool       `json:"queue_external_ticker"`
	TickerPaused     bool       `json:"queue_ticker_paused"`
	TickerMaxCount   int32      `json:"queue_ticker_max_count"`
	TickerMaxLag     float64    `json:"queue_ticker_max_lag_s"`
	TickerIdlePeriod float64    `json:"queue_ticker_idle_period_s"`
	TickPeriodMS     *int32     `json:"queue_tick_period_ms"` // effective; nil: classic PgQ thresholds
	TickerLag        *float64   `json:"ticker_lag_s"`         // seconds since the last tick
	EventsPerSec     *float64   `json:"ev_per_sec"`
	NewEvents        *int64     `json:"ev_new"`
	LastTickID       *int64     `json:"last_tick_id"`
	LastTickTime     *time.Time `json:"last_tick_time"`
	PendingEvents    *int64     `json:"pending_events"` // events not yet covered by a tick
}

// QueryQueueInfo reads every queue through the engine's own function.
const QueryQueueInfo = `
SELECT queue_name, queue_ntables, queue_cur_table,
       extract(epoch FROM queue_rotation_period)::float8, queue_switch_time,
       queue_external_ticker, queue_ticker_paused, queue_ticker_max_count,
       extract(epoch FROM queue_ticker_max_lag)::float8,
       extract(epoch FROM queue_ticker_idle_period)::float8,
       queue_tick_period_ms,
       extract(epoch FROM ticker_lag)::float8, ev_per_sec::float8, ev_new,
       last_tick_id, last_tick_time, pending_events
  FROM pgque.get_queue_info()
 ORDER BY queue_name`

// Queues reads [QueueInfo] for every queue. ErrUnavailable: the engine is
// not installed; ErrPermission: the role may not execute it.
func Queues(ctx context.Context, q db.Querier) ([]QueueInfo, error) {
	return queryAll(ctx, q, "reading pgque.get_queue_info()", QueryQueueInfo,
		func(row pgx.CollectableRow) (QueueInfo, error) {
			var i QueueInfo
			err := row.Scan(&i.Name, &i.NTables, &i.CurTable, &i.RotationPeriod, &i.SwitchTime,
				&i.ExternalTicker, &i.TickerPaused, &i.TickerMaxCount, &i.TickerMaxLag, &i.TickerIdlePeriod,
				&i.TickPeriodMS, &i.TickerLag, &i.EventsPerSec, &i.NewEvents, &i.LastTickID, &i.LastTickTime,
				&i.PendingEvents)
			return i, err
		})
}

// TickLag is the tick lag of one queue with the period it is measured against.
type TickLag struct {
	Queue         string   `json:"queue"`
	Lag           *float64 `json:"lag_s"`            // seconds since the last tick; nil: never ticked
	ExpectedEvery float64  `json:"expected_every_s"` // tick period, else ticker_max_lag (classic)
	IdlePeriod    float64  `json:"idle_period_s"`
	NewEvents     int64    `json:"ev_new"` // events waiting for a tick
	Paused        bool     `json:"paused"`
}

// TickLags derives each queue's [TickLag] from get_queue_info(): the
// figures a tick-lag check or a benchmark needs, without the rest.
func TickLags(ctx context.Context, q db.Querier) ([]TickLag, error) {
	qs, err := Queues(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]TickLag, 0, len(qs))
	for _, i := range qs {
		out = append(out, LagOf(i))
	}
	return out, nil
}

// LagOf derives the [TickLag] of one queue.
func LagOf(i QueueInfo) TickLag {
	t := TickLag{Queue: i.Name, Lag: i.TickerLag, ExpectedEvery: i.TickerMaxLag, IdlePeriod: i.TickerIdlePeriod, Paused: i.TickerPaused}
	if i.TickPeriodMS != nil {
		t.ExpectedEvery = float64(*i.TickPeriodMS) / 1000
	}
	if i.NewEvents != nil {
		t.NewEvents = *i.NewEvents
	}
	return t
}

// ConsumerInfo is one row of pgque.get_consumer_info().
type ConsumerInfo struct {
	Queue         string   `json:"queue_name"`
	Consumer      string   `json:"consumer_name"`
	Lag           *float64 `json:"lag_s"`       // age of the consumer's last finished tick
	LastSeen      *float64 `json:"last_seen_s"` // since the consumer last opened or finished a batch
	LastTick      *int64   `json:"last_tick"`
	CurrentBatch  *int64   `json:"current_batch"`
	NextTick      *int64   `json:"next_tick"`
	PendingEvents *int64   `json:"pending_events"`
}

// QueryConsumerInfo reads every classic consumer through the engine.
const QueryConsumerInfo = `
SELECT queue_name, consumer_name,
       extract(epoch FROM lag)::float8, extract(epoch FROM last_seen)::float8,
       last_tick, current_batch, next_tick, pending_events
  FROM pgque.get_consumer_info()
 ORDER BY queue_name, consumer_name`

// Consumers reads [ConsumerInfo] for every subscription.
func Consumers(ctx context.Context, q db.Querier) ([]ConsumerInfo, error) {
	return queryAll(ctx, q, "reading pgque.get_consumer_info()", QueryConsumerInfo,
		func(row pgx.CollectableRow) (ConsumerInfo, error) {
			var c ConsumerInfo
			err := row.Scan(&c.Queue, &c.Consumer, &c.Lag, &c.LastSeen, &c.LastTick, &c.CurrentBatch,
				&c.NextTick, &c.PendingEvents)
			return c, err
		})
}

// QueryLastMetaRotation reads when subscription rows last moved to another
// child (the last subscription-table rotation); NULL without subscriptions.
const QueryLastMetaRotation = `SELECT max(sub_moved_at) FROM pgque.subscription`

// LastMetaRotation returns the time of the last subscription-table
// rotation, or nil when there are no subscriptions. Needs SELECT on
// pgque.subscription (ErrPermission otherwise).
func LastMetaRotation(ctx context.Context, q db.Querier) (*time.Time, error) {
	var t *time.Time
	err := queryOne(ctx, q, "reading the last metadata rotation", QueryLastMetaRotation, nil, &t)
	return t, err
}

// TickGap is the longest pause between two consecutive ticks of one queue
// that both carried events (the queue was busy across the pause), among the
// tick rows the engine still keeps (a few metadata rotation periods).
type TickGap struct {
	Queue string    `json:"queue"`
	Gap   float64   `json:"gap_s"`
	From  time.Time `json:"from"` // the tick before the pause
}

// QueryTickGap finds [TickGap]. It reads pgque.tick and pgque.queue, which
// only their owner and superusers may read.
const QueryTickGap = `
SELECT q.queue_name, extract(epoch FROM g.tick_time - g.prev_time)::float8, g.prev_time
  FROM (SELECT t.tick_queue, t.tick_time, t.tick_new_ids,
               lag(t.tick_time) OVER w AS prev_time, lag(t.tick_new_ids) OVER w AS prev_new
          FROM pgque.tick t
        WINDOW w AS (PARTITION BY t.tick_queue ORDER BY t.tick_id)) g
  JOIN pgque.queue q ON q.queue_id = g.tick_queue
 WHERE g.tick_new_ids > 0 AND g.prev_new > 0
 ORDER BY g.tick_time - g.prev_time DESC
 LIMIT 1`

// LongestTickGap reads [TickGap]; nil when no queue had two consecutive
// busy ticks. ErrPermission for roles that may not read the tick table.
func LongestTickGap(ctx context.Context, q db.Querier) (*TickGap, error) {
	var g TickGap
	err := queryOne(ctx, q, "reading tick gaps", QueryTickGap, nil, &g.Queue, &g.Gap, &g.From)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &g, nil
}
