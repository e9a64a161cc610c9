package broker

import (
	"context"
	"fmt"
)

// Maintenance is the brokers' shared maintenance state: Push refuses
// pushes (503), Pop answers pops empty. It is stored in the database
// (pgque.broker_maintenance), so every broker of a database shares it.
type Maintenance struct {
	Push bool
	Pop  bool
}

// ReadMaintenance reads the maintenance switches: pgque.broker_maintenance.
func ReadMaintenance(ctx context.Context, q Querier) (Maintenance, error) {
	var m Maintenance
	if err := q.QueryRow(ctx, `SELECT push_paused, pop_paused FROM pgque.broker_maintenance()`).Scan(&m.Push, &m.Pop); err != nil {
		return m, wrap("read maintenance mode", err)
	}
	return m, nil
}

// SetMaintenance switches push or pop ("push" / "pop") maintenance on or
// off for every broker of the database (they are notified on channel
// MaintenanceChannel) and returns the switches after the change:
// pgque.set_broker_maintenance.
func SetMaintenance(ctx context.Context, q Querier, mode string, enabled bool) (Maintenance, error) {
	if mode != "push" && mode != "pop" {
		return Maintenance{}, fmt.Errorf("set maintenance mode: mode must be push or pop: %w", ErrInvalidInput)
	}
	var m Maintenance
	err := q.QueryRow(ctx, `SELECT push_paused, pop_paused FROM pgque.set_broker_maintenance($1, $2)`, mode, enabled).Scan(&m.Push, &m.Pop)
	if err != nil {
		return m, wrap("set maintenance mode", err)
	}
	return m, nil
}

// MaintenanceChannel is the NOTIFY channel a maintenance change is
// announced on (payload: the mode).
const MaintenanceChannel = "pgque.maintenance"
