package sql_test

import "testing"

// TestSetSettingTrimsAndNamesItsErrors: a value is stored trimmed; an
// unknown name raises 42704 (undefined_object), a bad value 22023
// (invalid_parameter_value), and neither changes anything.
func TestSetSettingTrimsAndNamesItsErrors(t *testing.T) {
	e := setup(t)
	var v string
	if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.set_setting('tick_period_ms', ' 10 ')`).Scan(&v); err != nil || v != "10" {
		t.Fatalf("set_setting(' 10 ') returned %q, %v; want \"10\"", v, err)
	}
	if got := e.int64(`SELECT count(*) FROM pgque.settings WHERE name = 'tick_period_ms' AND value = '10'`); got != 1 {
		t.Fatalf("tick_period_ms stored untrimmed (%d rows with '10')", got)
	}
	for _, c := range []struct {
		sql, code string
	}{
		{`SELECT pgque.set_setting('no_such_setting', '1')`, "42704"},
		{`SELECT pgque.set_setting('tick_period_ms', 'abc')`, "22023"},
		{`SELECT pgque.set_setting('tick_period_ms', '0')`, "22023"},
		{`SELECT pgque.set_setting('tick_period_ms', '60001')`, "22023"},
		{`SELECT pgque.set_setting('meta_rotation_period_ms', '360000000000')`, "22023"},
		{`SELECT pgque.set_setting('ticker_loop_enabled', 'maybe')`, "22023"},
		{`SELECT pgque.set_setting('ticker_debug_round_ms', '-1')`, "22023"},
	} {
		if err := e.sqlErr(c.sql); err.Code != c.code {
			t.Errorf("%s: SQLSTATE %s (%s), want %s", c.sql, err.Code, err.Message, c.code)
		}
	}
	if got := e.int64(`SELECT count(*) FROM pgque.settings WHERE name = 'tick_period_ms' AND value = '10'`); got != 1 {
		t.Fatal("a rejected value changed tick_period_ms")
	}
	// Booleans are stored in one spelling; the loop compares with 'false'.
	if err := e.conn.QueryRow(ctxT(t), `SELECT pgque.set_setting('ticker_loop_enabled', ' off')`).Scan(&v); err != nil || v != "false" {
		t.Fatalf("ticker_loop_enabled ' off' stored as %q, %v; want \"false\"", v, err)
	}
}

// TestCronJobNamesCoverEveryJob: every job cron_jobs() registers, on any
// pg_cron version, is named in cron_job_names(), which stop() and pgquectl
// match exactly; the purge job deletes run history by those exact names.
func TestCronJobNamesCoverEveryJob(t *testing.T) {
	e := setup(t)
	for _, v := range []string{"1.4.2", "1.6.7"} {
		if n := e.int64(`SELECT count(*) FROM pgque.cron_jobs($1) j WHERE NOT j.jobname = ANY (pgque.cron_job_names())`, v); n != 0 {
			t.Errorf("pg_cron %s: %d jobs not in cron_job_names()", v, n)
		}
		if n := e.int64(`SELECT count(*) FROM pgque.cron_jobs($1) j WHERE j.command LIKE '%LIKE%'`, v); n != 0 {
			t.Errorf("pg_cron %s: a job command matches names with LIKE", v)
		}
	}
	if n := e.int64(`SELECT count(*) FROM pgque.cron_jobs('1.4.2')`); n != 3 {
		t.Errorf("pg_cron 1.4: %d jobs, want 3 (two tickers, the purge)", n)
	}
	if n := e.int64(`SELECT count(*) FROM pgque.cron_jobs('1.6.7') WHERE command = 'CALL pgque.ticker_loop()' AND schedule = '1 seconds'`); n != 2 {
		t.Errorf("pg_cron 1.6: %d ticker jobs on '1 seconds', want 2 (one stands by on the loop lock)", n)
	}
}
