package sql_test

import (
	"context"
	"testing"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

// sqlPlant puts look-alikes of what ticker_loop() calls into public; each
// records that it ran. ticker_loop() runs with the pg_cron job owner's (a
// superuser's) rights and cannot have a SET clause.
const sqlPlant = `
CREATE TABLE public.pwned (what text);
CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE AS
  $$INSERT INTO public.pwned VALUES ('clock_timestamp') RETURNING pg_catalog.clock_timestamp()$$;
CREATE FUNCTION public.pg_sleep(double precision) RETURNS void LANGUAGE sql AS
  $$INSERT INTO public.pwned VALUES ('pg_sleep')$$;
CREATE FUNCTION public.to_timestamp(double precision) RETURNS timestamptz LANGUAGE sql VOLATILE AS
  $$INSERT INTO public.pwned VALUES ('to_timestamp') RETURNING pg_catalog.to_timestamp($1)$$;
CREATE FUNCTION public.make_interval(years int DEFAULT 0, months int DEFAULT 0, weeks int DEFAULT 0, days int DEFAULT 0, hours int DEFAULT 0, mins int DEFAULT 0, secs double precision DEFAULT 0)
  RETURNS interval LANGUAGE sql VOLATILE AS
  $$INSERT INTO public.pwned VALUES ('make_interval') RETURNING pg_catalog.make_interval(years, months, weeks, days, hours, mins, secs)$$;
CREATE FUNCTION public.ts_ge(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql VOLATILE AS
  $$INSERT INTO public.pwned VALUES ('>=') RETURNING pg_catalog.timestamptz_ge($1, $2)$$;
CREATE OPERATOR public.>= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.ts_ge);
CREATE FUNCTION public.text_eq(text, text) RETURNS boolean LANGUAGE sql VOLATILE AS
  $$INSERT INTO public.pwned VALUES ('=') RETURNING pg_catalog.texteq($1, $2)$$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_eq);`

// TestTickerLoopResolvesNothingThroughPublic: with a database default
// search_path that puts public before pg_catalog and look-alikes planted
// there, a ticker_loop() run ticks and none of them runs.
func TestTickerLoopResolvesNothingThroughPublic(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.set_tick_period_ms(10)`)
	e.exec(`SELECT pgque.set_setting('ticker_slot_seconds', '1'), pgque.set_setting('ticker_overrun_ms', '0')`)
	e.exec(sqlPlant)
	e.exec(`DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = public, pg_catalog', current_database()); END$$`)
	e.exec(`SELECT pgque.send('q', 'x'::text)`)
	loop := pgtest.Conn(t, e.dsn) // a new session: it gets the database's search_path
	var path string
	if err := loop.QueryRow(ctxT(t), `SHOW search_path`).Scan(&path); err != nil || path != "public, pg_catalog" {
		t.Fatalf("the loop's session has search_path %q (%v)", path, err)
	}
	before := e.int64(`SELECT count(*) FROM pgque.tick`)
	if _, err := loop.Exec(context.Background(), `CALL pgque.ticker_loop()`); err != nil {
		t.Fatalf("ticker_loop: %v", err)
	}
	if n := e.int64(`SELECT count(*) FROM public.pwned`); n != 0 {
		var what string
		_ = e.conn.QueryRow(ctxT(t), `SELECT string_agg(DISTINCT what, ', ') FROM public.pwned`).Scan(&what)
		t.Fatalf("ticker_loop ran %d planted calls: %s", n, what)
	}
	if after := e.int64(`SELECT count(*) FROM pgque.tick`); after <= before {
		t.Fatal("ticker_loop made no tick")
	}
}
