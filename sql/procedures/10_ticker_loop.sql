-- pgque.ticker_loop(): the pg_cron ticker. Ticks every due queue (ticker()),
-- COMMITs after each round - every tick is its own short transaction, so the
-- loop never holds the xmin horizon - and sleeps to the next boundary of the
-- shortest tick period in use (epoch-aligned: no drift; 1 s rounds with
-- classic thresholds, ticker_classic_loop_ms). Every 200 ms it also rotates
-- the tick/subscription tables, every second it confirms event-table switches
-- (step 2); each in its own transaction.
-- Slot and handover: a run lasts until the end of its pg_cron slot
-- (ticker_slot_seconds, epoch-aligned) plus ticker_overrun_ms. pg_cron runs
-- one instance of a job at a time and queues the run whose slot passed while
-- this one was still going, starting it as soon as this one returns, so the
-- handover leaves no gap longer than pg_cron's start-up (~10 ms).
-- No SET clause and SECURITY INVOKER: PostgreSQL forbids COMMIT otherwise.
-- Must be called as exactly "CALL pgque.ticker_loop()" outside a transaction
-- block. Locks: as ticker() and rotate_metadata(). Called by: pg_cron.
CREATE OR REPLACE PROCEDURE pgque.ticker_loop()
LANGUAGE plpgsql
AS $$
DECLARE
    v_start     timestamptz := clock_timestamp();
    v_slot      int := coalesce(pgque.get_setting('ticker_slot_seconds')::int, 60);
    v_overrun   int := coalesce(pgque.get_setting('ticker_overrun_ms')::int, 1500);
    v_deadline  timestamptz;
    v_period    int;
    v_now       timestamptz;
    v_next      timestamptz;
    v_next_cfg  timestamptz := v_start;
    v_next_meta timestamptz := v_start;
    v_next_sw   timestamptz := v_start;
BEGIN
    v_overrun := least(v_overrun, v_slot * 1000 / 2);
    v_deadline := to_timestamp(ceil(extract(epoch FROM v_start) / v_slot) * v_slot)
                  + make_interval(secs => v_overrun / 1000.0);
    LOOP
        IF clock_timestamp() >= v_next_cfg THEN
            SELECT coalesce(min(p), coalesce(pgque.get_setting('ticker_classic_loop_ms')::int, 1000))
              INTO v_period
              FROM (SELECT pgque.get_setting('tick_period_ms')::int AS p
                    UNION ALL
                    SELECT q.queue_tick_period_ms FROM pgque.queue q
                     WHERE NOT q.queue_external_ticker AND NOT q.queue_ticker_paused) s;
            v_next_cfg := clock_timestamp() + interval '1 second';
        END IF;

        -- A failing round is logged and retried next round; the loop goes on.
        BEGIN
            PERFORM pgque.ticker();
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pgque: ticker() failed this round: % (%)', SQLERRM, SQLSTATE;
        END;
        COMMIT;

        IF clock_timestamp() >= v_next_meta THEN
            BEGIN
                PERFORM pgque.rotate_metadata();
            EXCEPTION WHEN OTHERS THEN
                RAISE WARNING 'pgque: rotate_metadata() failed: % (%)', SQLERRM, SQLSTATE;
            END;
            COMMIT;
            v_next_meta := clock_timestamp() + interval '200 milliseconds';
        END IF;
        IF clock_timestamp() >= v_next_sw THEN
            BEGIN
                PERFORM pgque.maint_rotate_tables_step2();
            EXCEPTION WHEN OTHERS THEN
                RAISE WARNING 'pgque: maint_rotate_tables_step2() failed: % (%)', SQLERRM, SQLSTATE;
            END;
            COMMIT;
            v_next_sw := clock_timestamp() + interval '1 second';
        END IF;

        v_now := clock_timestamp();
        EXIT WHEN v_now >= v_deadline;
        v_next := to_timestamp(ceil(extract(epoch FROM v_now) * 1000 / v_period) * v_period / 1000.0);
        IF v_next <= v_now THEN
            v_next := v_next + make_interval(secs => v_period / 1000.0);
        END IF;
        IF v_next > v_deadline THEN
            v_next := v_deadline;
        END IF;
        PERFORM pg_sleep(extract(epoch FROM v_next - clock_timestamp()));
        -- End the sleep's transaction so the round's now() - tick_time and
        -- the period check - is taken after the sleep, not before it.
        COMMIT;
    END LOOP;
END;
$$;
