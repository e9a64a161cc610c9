package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Thresholds are the limits the checks compare against. DefaultThresholds
// documents each default; docs/reference/status.md explains the reasoning. A zero
// value for a limit documented as "0 disables" turns that check off.
type Thresholds struct {
	// XminWarn / XminCrit: a session, prepared transaction or walsender of
	// this database holding the xmin horizon (backend_xmin or backend_xid)
	// for at least this long, measured from its transaction start.
	// Defaults 60 s / 300 s.
	XminWarn time.Duration `json:"xmin_warn_s"`
	XminCrit time.Duration `json:"xmin_crit_s"`

	// Tick lag of a queue with events waiting for a tick. The expected
	// interval E is the queue's effective tick period, or ticker_max_lag
	// when it uses the classic PgQ thresholds. WARN from
	// max(TickLagWarnFactor × E, TickLagWarnMin), CRIT from
	// max(TickLagCritFactor × E, TickLagCritMin). Defaults 3× / 3 s and
	// 10× / 10 s: at a 10 ms period, WARN after 3 s and CRIT after 10 s
	// without a tick; with classic thresholds (3 s max lag) 9 s / 30 s.
	TickLagWarnFactor float64       `json:"tick_lag_warn_factor"`
	TickLagWarnMin    time.Duration `json:"tick_lag_warn_min_s"`
	TickLagCritFactor float64       `json:"tick_lag_crit_factor"`
	TickLagCritMin    time.Duration `json:"tick_lag_crit_min_s"`
	// IdleTickFactor: a queue with nothing pending is WARN when it has not
	// ticked for IdleTickFactor × its ticker_idle_period (default 3; 0
	// disables). Idle queues never go CRIT: nothing is late.
	IdleTickFactor float64 `json:"idle_tick_factor"`
	// RotationOverdueFactor: WARN when a queue's event tables have not
	// rotated for this many rotation periods (default 3; 0 disables): a
	// slow consumer pins them and they keep growing.
	RotationOverdueFactor float64 `json:"rotation_overdue_factor"`

	// ConsumerLagWarn / ConsumerLagCrit: a consumer with pending events
	// whose last finished tick is this old (defaults 15 min / 0 = no CRIT).
	ConsumerLagWarn time.Duration `json:"consumer_lag_warn_s"`
	ConsumerLagCrit time.Duration `json:"consumer_lag_crit_s"`

	// Dead tuples, summed over a table family's children, WARN above the
	// bound and CRIT from DeadCritFactor × bound (default 4). The bounds
	// are the engine's design targets under a held xmin: tick 200,
	// subscription 500, broker cursors 500. Event tables are insert-only
	// (expected 0), but a rolled-back send leaves its rows dead until the
	// table rotates, so the default tolerates 1000; set 0 to WARN on any.
	TickDeadMax         int64   `json:"tick_dead_max"`
	SubscriptionDeadMax int64   `json:"subscription_dead_max"`
	CursorDeadMax       int64   `json:"cursor_dead_max"`
	EventDeadMax        int64   `json:"event_dead_max"`
	DeadCritFactor      float64 `json:"dead_crit_factor"`

	// CronWindow: failed runs of our pg_cron jobs that started within this
	// window are CRIT (default 10 min).
	CronWindow time.Duration `json:"cron_window_s"`
	// A job whose newest run started longer ago than Factor × its schedule
	// interval + CronStaleGrace is WARN (factor 2) / CRIT (factor 5); a
	// 'N seconds' schedule has interval N s, a cron expression '* * * * *'
	// 60 s, '*/k * * * *' k min. Grace default 30 s.
	CronStaleWarnFactor float64       `json:"cron_stale_warn_factor"`
	CronStaleCritFactor float64       `json:"cron_stale_crit_factor"`
	CronStaleGrace      time.Duration `json:"cron_stale_grace_s"`
	// CronRunDetailsWarn: WARN when cron.job_run_details holds more rows
	// (default 1,000,000; 0 disables).
	CronRunDetailsWarn int64 `json:"cron_run_details_warn"`
	// CronRunningWarn: WARN when running jobs reach this share of
	// cron.max_running_jobs (default 0.8); CRIT at 1.0.
	CronRunningWarn float64 `json:"cron_running_warn"`

	// NotifyWarn / NotifyCrit: pg_notification_queue_usage() (0..1),
	// defaults 0.10 / 0.50 (PostgreSQL itself starts warning at 0.50).
	NotifyWarn float64 `json:"notify_warn"`
	NotifyCrit float64 `json:"notify_crit"`

	// ConnectionsWarn / ConnectionsCrit: client connections as a share of
	// max_connections - superuser_reserved_connections (0.80 / 0.95).
	ConnectionsWarn float64 `json:"connections_warn"`
	ConnectionsCrit float64 `json:"connections_crit"`

	// WALWarn / WALCrit: WAL bytes per second over the sample (0 disables,
	// the default: a healthy rate depends entirely on the workload).
	WALWarn float64 `json:"wal_warn_bytes_per_s"`
	WALCrit float64 `json:"wal_crit_bytes_per_s"`
}

// DefaultThresholds returns the documented defaults.
func DefaultThresholds() Thresholds {
	return Thresholds{
		XminWarn:              60 * time.Second,
		XminCrit:              300 * time.Second,
		TickLagWarnFactor:     3,
		TickLagWarnMin:        3 * time.Second,
		TickLagCritFactor:     10,
		TickLagCritMin:        10 * time.Second,
		IdleTickFactor:        3,
		RotationOverdueFactor: 3,
		ConsumerLagWarn:       15 * time.Minute,
		TickDeadMax:           200,
		SubscriptionDeadMax:   500,
		CursorDeadMax:         500,
		EventDeadMax:          1000,
		DeadCritFactor:        4,
		CronWindow:            10 * time.Minute,
		CronStaleWarnFactor:   2,
		CronStaleCritFactor:   5,
		CronStaleGrace:        30 * time.Second,
		CronRunDetailsWarn:    1_000_000,
		CronRunningWarn:       0.8,
		NotifyWarn:            0.10,
		NotifyCrit:            0.50,
		ConnectionsWarn:       0.80,
		ConnectionsCrit:       0.95,
	}
}

// Validate reports thresholds that cannot work (negative values, WARN
// above CRIT), so a typo in a flag fails loudly instead of hiding problems.
func (t Thresholds) Validate() error {
	var errs []error
	pair := func(name string, w, c float64) {
		if w < 0 || c < 0 {
			errs = append(errs, fmt.Errorf("%s: thresholds must not be negative", name))
		}
		if c > 0 && w > c {
			errs = append(errs, fmt.Errorf("%s: WARN (%v) is above CRIT (%v)", name, w, c))
		}
	}
	// Durations keep their units in the message: "WARN (10m0s) is above CRIT (1m0s)".
	pairDur := func(name string, w, c time.Duration) {
		ws, cs := trimZeroUnits(w.String()), trimZeroUnits(c.String())
		if w < 0 || c < 0 {
			errs = append(errs, fmt.Errorf("%s: thresholds must not be negative (WARN %s, CRIT %s)", name, ws, cs))
		}
		if c > 0 && w > c {
			errs = append(errs, fmt.Errorf("%s: WARN (%s) is above CRIT (%s)", name, ws, cs))
		}
	}
	pairDur("xmin", t.XminWarn, t.XminCrit)
	pair("tick lag factor", t.TickLagWarnFactor, t.TickLagCritFactor)
	pairDur("tick lag minimum", t.TickLagWarnMin, t.TickLagCritMin)
	pairDur("consumer lag", t.ConsumerLagWarn, t.ConsumerLagCrit)
	pair("cron staleness factor", t.CronStaleWarnFactor, t.CronStaleCritFactor)
	pair("notify", t.NotifyWarn, t.NotifyCrit)
	pair("connections", t.ConnectionsWarn, t.ConnectionsCrit)
	pair("wal", t.WALWarn, t.WALCrit)
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"idle tick factor", t.IdleTickFactor}, {"rotation overdue factor", t.RotationOverdueFactor},
		{"tick dead max", float64(t.TickDeadMax)}, {"subscription dead max", float64(t.SubscriptionDeadMax)},
		{"cursor dead max", float64(t.CursorDeadMax)}, {"event dead max", float64(t.EventDeadMax)},
		{"cron window", float64(t.CronWindow)}, {"cron stale grace", float64(t.CronStaleGrace)},
		{"cron run details", float64(t.CronRunDetailsWarn)}, {"cron running share", t.CronRunningWarn},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative", f.name))
		}
	}
	if t.DeadCritFactor != 0 && t.DeadCritFactor < 1 {
		errs = append(errs, errors.New("dead tuple CRIT factor: must be at least 1 (0 disables CRIT)"))
	}
	return errors.Join(errs...)
}

// MarshalJSON writes durations as seconds (the field names end in _s), like
// every duration in the report.
func (t Thresholds) MarshalJSON() ([]byte, error) {
	out := map[string]any{}
	v := reflect.ValueOf(t)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		val := v.Field(i).Interface()
		if d, isDur := val.(time.Duration); isDur {
			val = d.Seconds()
		}
		out[f.Tag.Get("json")] = val
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes (durations in seconds).
func (t *Thresholds) UnmarshalJSON(b []byte) error {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("decoding thresholds: %w", err)
	}
	v := reflect.ValueOf(t).Elem()
	for i := range v.NumField() {
		raw, found := in[v.Type().Field(i).Tag.Get("json")]
		if !found {
			continue
		}
		f := v.Field(i)
		if f.Type() == reflect.TypeFor[time.Duration]() {
			var s float64
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("decoding threshold %s: %w", v.Type().Field(i).Name, err)
			}
			f.SetInt(int64(s * float64(time.Second)))
			continue
		}
		if err := json.Unmarshal(raw, f.Addr().Interface()); err != nil {
			return fmt.Errorf("decoding threshold %s: %w", v.Type().Field(i).Name, err)
		}
	}
	return nil
}

// ThresholdFlag is the command-line flag of one threshold: its name, help
// and the field it sets (*time.Duration, *float64 or *int64).
type ThresholdFlag struct {
	Name, Help string
	Ptr        any
}

// ThresholdFlags maps each threshold flag of `pgquectl status` to its field
// of t, so a threshold's field, default, validation and flag live in this
// one file.
func ThresholdFlags(t *Thresholds) []ThresholdFlag {
	type fl = ThresholdFlag
	return []fl{
		{"xmin-warn", "xmin horizon held this long → WARN", &t.XminWarn},
		{"xmin-crit", "xmin horizon held this long → CRIT", &t.XminCrit},
		{"tick-lag-warn-factor", "events waiting and no tick for factor × tick period (classic: ticker_max_lag) → WARN", &t.TickLagWarnFactor},
		{"tick-lag-warn-min", "tick lag WARN limit is never below this", &t.TickLagWarnMin},
		{"tick-lag-crit-factor", "events waiting and no tick for factor × tick period (classic: ticker_max_lag) → CRIT", &t.TickLagCritFactor},
		{"tick-lag-crit-min", "tick lag CRIT limit is never below this", &t.TickLagCritMin},
		{"idle-tick-factor", "idle queue without a tick for factor × idle period → WARN (0: off)", &t.IdleTickFactor},
		{"rotation-overdue-factor", "event tables not rotated for factor × rotation period → WARN (0: off)", &t.RotationOverdueFactor},
		{"consumer-lag-warn", "consumer with pending events lagging this much → WARN (0: off)", &t.ConsumerLagWarn},
		{"consumer-lag-crit", "consumer with pending events lagging this much → CRIT (0: off)", &t.ConsumerLagCrit},
		{"tick-dead-max", "dead tuples in the tick tables above this → WARN", &t.TickDeadMax},
		{"subscription-dead-max", "dead tuples in the subscription tables above this → WARN", &t.SubscriptionDeadMax},
		{"cursor-dead-max", "dead tuples in the broker cursor tables above this → WARN", &t.CursorDeadMax},
		{"event-dead-max", "dead tuples in the event tables above this → WARN", &t.EventDeadMax},
		{"dead-crit-factor", "dead tuples at factor × bound → CRIT (0: off)", &t.DeadCritFactor},
		{"cron-window", "a failed run of our pg_cron jobs within this window → CRIT", &t.CronWindow},
		{"cron-stale-warn-factor", "newest run older than factor × schedule interval + grace → WARN", &t.CronStaleWarnFactor},
		{"cron-stale-crit-factor", "newest run older than factor × schedule interval + grace → CRIT", &t.CronStaleCritFactor},
		{"cron-stale-grace", "grace added to the cron staleness limits", &t.CronStaleGrace},
		{"cron-run-details-warn", "cron.job_run_details rows above this → WARN (0: off)", &t.CronRunDetailsWarn},
		{"cron-running-warn", "running jobs at this share of cron.max_running_jobs → WARN", &t.CronRunningWarn},
		{"notify-warn", "NOTIFY queue usage (0..1) → WARN", &t.NotifyWarn},
		{"notify-crit", "NOTIFY queue usage (0..1) → CRIT", &t.NotifyCrit},
		{"connections-warn", "share of max_connections in use → WARN", &t.ConnectionsWarn},
		{"connections-crit", "share of max_connections in use → CRIT", &t.ConnectionsCrit},
		{"wal-warn", "WAL bytes/s → WARN (0: off)", &t.WALWarn},
		{"wal-crit", "WAL bytes/s → CRIT (0: off)", &t.WALCrit},
	}
}
