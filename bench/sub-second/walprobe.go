package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgquectl/pgquectl/internal/pgstats"
)

// Statements of the WAL-per-tick probe.
const (
	wpQueue     = "walprobe"
	wpCreate    = `SELECT pgque.create_queue($1)`
	wpPeriod    = `SELECT pgque.set_queue_config($1, 'tick_period_ms', '1')`
	wpSubscribe = `SELECT pgque.subscribe($1, 'walprobe')` // fast ticks follow classic consumers
	wpSend      = `SELECT pgque.send($1, '{}'::text)`
	wpTick      = `SELECT pgque.ticker($1)`
	wpDrop      = `SELECT pgque.drop_queue($1, true)`
	wpRounds    = 400
	wpWarmRound = 50
)

// probeWALPerTick measures the WAL one materialized tick of one active
// queue writes: WAL of N × (send; tick) minus WAL of N × send, over N. It
// runs before pg_cron starts ticking, alone on the cluster, after warm-up
// rounds (so full-page images after the last checkpoint are paid already).
// The result documents ticker.BytesPerTick (pgquectl tick's projection).
func probeWALPerTick(ctx context.Context, c *pgx.Conn) (float64, error) {
	for _, st := range []string{wpCreate, wpPeriod, wpSubscribe} {
		if _, err := c.Exec(ctx, st, wpQueue); err != nil {
			return 0, fmt.Errorf("wal probe: %w", err)
		}
	}
	defer func() { _, _ = c.Exec(context.WithoutCancel(ctx), wpDrop, wpQueue) }()
	round := func(tick bool) error {
		if _, err := c.Exec(ctx, wpSend, wpQueue); err != nil {
			return err
		}
		if !tick {
			return nil
		}
		time.Sleep(2 * time.Millisecond) // a new 1 ms period slot
		var id *int64
		if err := c.QueryRow(ctx, wpTick, wpQueue).Scan(&id); err != nil {
			return err
		}
		if id == nil {
			return fmt.Errorf("pgque.ticker(%q) made no tick", wpQueue)
		}
		return nil
	}
	measure := func(tick bool) (int64, error) {
		for range wpWarmRound {
			if err := round(tick); err != nil {
				return 0, err
			}
		}
		w0, err := pgstats.ReadWAL(ctx, c)
		if err != nil {
			return 0, err
		}
		for range wpRounds {
			if err := round(tick); err != nil {
				return 0, err
			}
		}
		w1, err := pgstats.ReadWAL(ctx, c)
		if err != nil {
			return 0, err
		}
		return pgstats.Rate(w0, w1).Bytes, nil
	}
	withTicks, err := measure(true)
	if err != nil {
		return 0, fmt.Errorf("wal probe: %w", err)
	}
	sendsOnly, err := measure(false)
	if err != nil {
		return 0, fmt.Errorf("wal probe: %w", err)
	}
	return float64(withTicks-sendsOnly) / wpRounds, nil
}
