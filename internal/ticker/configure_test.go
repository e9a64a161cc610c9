package ticker_test

import (
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
	"github.com/pgquectl/pgquectl/internal/ticker"
)

// TestPeriodRangeIsTheEngines: Go's tick-period range constants are the
// engine's one definition (pgque.setting_spec(), tick_period_ms).
func TestPeriodRangeIsTheEngines(t *testing.T) {
	t.Parallel()
	conn := pgtest.Conn(t, pgtest.NewDB(t))
	var lo, hi int64
	if err := conn.QueryRow(t.Context(), `SELECT min_value::int8, max_value::int8 FROM pgque.setting_spec() WHERE name = 'tick_period_ms'`).Scan(&lo, &hi); err != nil {
		t.Fatal(err)
	}
	if got := (time.Duration(lo) * time.Millisecond); got != ticker.MinPeriod {
		t.Errorf("engine's minimum tick period %s, ticker.MinPeriod %s", got, ticker.MinPeriod)
	}
	if got := (time.Duration(hi) * time.Millisecond); got != ticker.MaxPeriod {
		t.Errorf("engine's maximum tick period %s, ticker.MaxPeriod %s", got, ticker.MaxPeriod)
	}
}
