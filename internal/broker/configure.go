package broker

import (
	"context"
	"encoding/json"

	"github.com/pgquectl/pgquectl/internal/db"
)

// QueueConfig is a queue's identity and effective broker options.
type QueueConfig struct {
	QueueID   int
	Queue     string
	Namespace string
	Task      string
	// Options holds every option with its effective value, by the HTTP
	// API's names (leaseTime, retryLimit, ...).
	Options map[string]any
}

// Configure creates the queue if needed and sets the options present in
// options (HTTP API names; a JSON null resets one); namespace / task nil
// keep their value. One call of pgque.configure_queue.
func Configure(ctx context.Context, q Querier, queue string, namespace, task *string, options json.RawMessage) (QueueConfig, error) {
	var opts *string
	if len(options) > 0 {
		s := string(options)
		opts = &s
	}
	var c QueueConfig
	var ns, tk *string
	var raw []byte
	err := q.QueryRow(ctx, `SELECT queue_id, queue_name, namespace, task, options FROM pgque.configure_queue($1, $2, $3, $4::jsonb)`,
		queue, namespace, task, opts).Scan(&c.QueueID, &c.Queue, &ns, &tk, &raw)
	if err != nil {
		return c, wrap("configure", err)
	}
	c.Namespace, c.Task = db.Deref(ns), db.Deref(tk)
	if err := json.Unmarshal(raw, &c.Options); err != nil {
		return c, wrap("configure", err)
	}
	return c, nil
}
