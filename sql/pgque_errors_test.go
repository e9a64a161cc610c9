package sql_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestPgQueErrorsAreRaiseException: every error PgQue 0.2 raises with a
// plain RAISE EXCEPTION (SQLSTATE P0001) is P0001 here too, so a PgQue
// client's PL/pgSQL "exception when raise_exception" block still catches
// it; the message is ours. Each statement runs in such a block, which
// re-raises anything else, and fails when nothing was raised or the
// message lacks the expected words.
func TestPgQueErrorsAreRaiseException(t *testing.T) {
	e := setup(t)
	e.exec(`SELECT pgque.create_queue('q')`)
	e.exec(`SELECT pgque.subscribe('q', 'c')`)
	e.exec(`SELECT pgque.create_queue('paused')`)
	e.exec(`SELECT pgque.set_queue_config('paused', 'ticker_paused', 'true')`)
	e.exec(`SELECT pgque.create_queue('external')`)
	e.exec(`SELECT pgque.set_queue_config('external', 'external_ticker', 'true')`)
	cases := []struct{ name, stmt, words string }{
		{"ticker unknown queue", `pgque.ticker('nope')`, "no such queue"},
		{"ticker paused queue", `pgque.ticker('paused')`, "paused"},
		{"ticker external queue", `pgque.ticker('external')`, "external tick source"},
		{"force_tick unknown queue", `pgque.force_tick('nope')`, "no such queue"},
		{"force_next_tick unknown queue", `pgque.force_next_tick('nope')`, "no such queue"},
		{"create_queue NULL", `pgque.create_queue(NULL)`, "NULL"},
		{"create_queue name too long", `pgque.create_queue(repeat('x', 58))`, "limit is 57"},
		{"drop_queue unknown queue", `pgque.drop_queue('nope')`, `"nope" does not exist`},
		{"drop_queue with consumers", `pgque.drop_queue('q')`, "still has consumers"},
		{"set_queue_config unknown queue", `pgque.set_queue_config('nope', 'ticker_max_count', '5')`, `"nope" does not exist`},
		{"set_queue_config bad value", `pgque.set_queue_config('q', 'ticker_max_count', '0')`, "at least 1"},
		{"set_queue_config unknown parameter", `pgque.set_queue_config('q', 'no_such_param', '1')`, "unknown parameter"},
		{"set_tick_period_ms out of range", `pgque.set_tick_period_ms(0)`, "out of range"},
		{"send unknown queue", `pgque.send('nope', 'x'::text)`, `"nope" does not exist`},
		{"insert_event unknown queue", `pgque.insert_event('nope', 't', 'd')`, `"nope" does not exist`},
		{"send_batch unknown queue", `pgque.send_batch('nope', ARRAY['a'])`, `"nope" does not exist`},
		{"send_batch NULL payloads", `pgque.send_batch('q', NULL::text[])`, "not NULL"},
		{"subscribe unknown queue", `pgque.subscribe('nope', 'c')`, `"nope" does not exist`},
		{"register_consumer_at unknown tick", `pgque.register_consumer_at('q', 'c2', 999999)`, "does not exist"},
		{"receive unknown consumer", `* FROM pgque.receive('q', 'nobody', 10)`, "not subscribed"},
		{"receive unknown queue", `* FROM pgque.receive('nope', 'c', 10)`, `"nope" does not exist`},
		{"receive max_return 0", `* FROM pgque.receive('q', 'c', 0)`, "at least 1"},
		{"next_batch unknown consumer", `pgque.next_batch('q', 'nobody')`, "not subscribed"},
		{"nack unknown batch", `pgque.nack(-42, ROW(1, -42, 't', 'p', 0, now(), NULL, NULL, NULL, NULL)::pgque.message)`, "batch not found"},
		{"nack without message", `pgque.nack(-42, NULL::pgque.message)`, "msg_id"},
		{"dlq_replay unknown entry", `pgque.dlq_replay(-1)`, "does not exist"},
	}
	if e.int64(`SELECT count(*) FROM pg_catalog.pg_extension WHERE extname = 'pg_cron'`) == 0 {
		cases = append(cases, struct{ name, stmt, words string }{"start without pg_cron", `pgque.start()`, "pg_cron is not installed"})
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			_, err := e.conn.Exec(ctxT(t), fmt.Sprintf(`DO $do$
BEGIN
    PERFORM %s;
    RAISE EXCEPTION 'no error was raised' USING ERRCODE = 'data_exception';
EXCEPTION WHEN raise_exception THEN
    IF strpos(SQLERRM, %s) = 0 THEN
        RAISE EXCEPTION 'caught as raise_exception, but the message is: %%', SQLERRM USING ERRCODE = 'data_exception';
    END IF;
END
$do$`, c.stmt, quoteLiteral(c.words)))
			if err != nil {
				t.Fatalf("%s in an \"exception when raise_exception\" block: %v", c.stmt, err)
			}
		})
	}
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
