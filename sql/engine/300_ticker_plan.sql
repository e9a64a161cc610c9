-- pgque.ticker_plan(): ticker()'s first half: for every queue that is due
-- (due_queues), in this order, the producers in flight (tick_in_flight, one
-- pg_locks read for all of them; none for queues due_queues calls quiet,
-- and no read when all are) and each queue's prepared tick
-- (tick_prepare) - everything but the INSERT, so that a caller can run it
-- inside an exception block and INSERT the rows outside it (ticker_loop: a
-- write inside a block gives the subtransaction an xid, which the tick's
-- commit record then lists). A queue whose tick would wait on a lock longer
-- than ticker_lock_timeout_ms, or whose tick lock another session holds, is
-- left out (the next call ticks it), so one stuck queue never stalls the
-- others; so is a queue dropped while the call runs (its relations gone):
-- the set-based check then falls back to queue by queue.
-- Must run in READ COMMITTED (raises otherwise).
-- Returns: the rows to INSERT into pgque.tick (possibly none). Locks: the
-- shared advisory lock (pgque.lock_id_class(), pgque.lock_id_ticking()) for the transaction, which marks it
-- as a ticker for other ticks' pg_locks reading (tick_in_flight); per queue,
-- as tick_prepare (its tick lock, ROW EXCLUSIVE on the tick child), held to
-- the end of the transaction. Writes: queue (only to clear a forced tick).
-- Diagnostics: when the session setting pgque.ticker_debug_round_ms is
-- over 0 (ticker_loop() sets it from the ticker_debug_round_ms setting), a
-- call slower than that many ms, or one that skipped a due queue, RAISEs
-- LOG with its timings (the due check: due_queues and the pg_locks read;
-- the slowest queue's tick_prepare) and, per skipped queue, why: who holds
-- its tick lock (pid, application, state, query), or that a newer tick
-- appeared meanwhile.
-- Idle state: records in the session setting pgque.ticker_idle the
-- snapshot it read before its check and, when it found nothing due with
-- the same snapshot as the previous call, until when nothing falls due by
-- time (ticker_idle_until); when it found nothing due and no classic
-- consumer exists, until when no tick falls due even with events coming
-- in (ticker_push_idle_until); ticker_idle() reads it. It first deletes
-- the ticker_wake rows it sees (their changes are in its check; such a
-- call has written, so it records no idle time: the next one does).
-- Called by: ticker(), ticker_loop().
CREATE OR REPLACE FUNCTION pgque.ticker_plan()
RETURNS pgque.tick[]
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_due     record;
    v_qid     int;
    v_last    bigint;
    v_seq     bigint;
    v_probe   boolean;
    v_own     boolean;
    v_quiet   boolean;
    v_xids    bigint[];
    v_row     pgque.tick;
    v_plan    pgque.tick[] := '{}';
    v_timeout text := current_setting('lock_timeout');
    v_debug   int := CASE WHEN current_setting('pgque.ticker_debug_round_ms', true) ~ '^[0-9]{1,9}$'
                          THEN current_setting('pgque.ticker_debug_round_ms', true)::int ELSE 0 END;
    v_t0      timestamptz;
    v_t_due   timestamptz;
    v_t_q     timestamptz;
    v_n_due   int := 0;
    v_slow_ms float8 := 0;
    v_slow_q  text;
    v_skips   text;
    v_fp      text;
    v_idle    text;
    v_until   timestamptz;
    v_push    timestamptz;
    v_due_n   int := 0;
BEGIN
    IF v_debug > 0 THEN
        v_t0 := clock_timestamp();
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgque: ticker() must run in READ COMMITTED, not %', upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'A tick records the current snapshot; in REPEATABLE READ or SERIALIZABLE it could be older than the previous tick. Call the ticker in its own READ COMMITTED transaction.';
    END IF;
    -- What ticker_idle() compares: the snapshot before the due check.
    v_fp := pg_current_snapshot()::text;
    v_idle := current_setting('pgque.ticker_idle', true);
    -- Changes ticker_idle's push state waits for (ticker_wake): seen now.
    IF EXISTS (SELECT FROM pgque.ticker_wake) THEN
        DELETE FROM pgque.ticker_wake;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(pgque.lock_id_class(), pgque.lock_id_ticking());
    PERFORM set_config('lock_timeout', coalesce(pgque.get_setting('ticker_lock_timeout_ms'), '20') || 'ms', true);
    BEGIN
        -- In this order (tick_queue): the sequences (due_queues), pg_locks
        -- once for all due queues (tick_in_flight), then each snapshot.
        FOR v_due IN
            WITH d AS MATERIALIZED (SELECT * FROM pgque.due_queues(NULL)),
            -- quiet queues (due_queues) have nobody in flight: pg_locks is
            -- read for the others only, and tick_in_flight is not called
            -- at all when there are none (the lateral call runs once per
            -- row of a, and a has none then; a and f are MATERIALIZED: an
            -- inlined a turned the call into a plain function scan that
            -- PostgreSQL 16 and 17 ran whatever the filter said)
            a AS MATERIALIZED (SELECT ARRAY(SELECT d2.queue_id FROM d d2 WHERE NOT d2.quiet ORDER BY d2.queue_id) AS ids),
            f AS MATERIALIZED (SELECT fi.* FROM a CROSS JOIN LATERAL pgque.tick_in_flight(a.ids) fi
                   WHERE pg_catalog.cardinality(a.ids) > 0)
            SELECT d.queue_id, d.queue_name, d.last_tick_id, d.event_seq,
                   coalesce(f.probe, false) AS probe, coalesce(f.own_inserted, false) AS own_inserted, f.xids
              FROM d
              LEFT JOIN f ON f.queue_id = d.queue_id
             WHERE d.quiet OR f.queue_id IS NOT NULL
             ORDER BY d.queue_id
        LOOP
            v_due_n := v_due_n + 1;
            IF v_debug > 0 THEN
                v_t_q := clock_timestamp();
                v_t_due := coalesce(v_t_due, v_t_q);
                v_n_due := v_n_due + 1;
            END IF;
            BEGIN
                v_row := pgque.tick_prepare(v_due.queue_id, v_due.last_tick_id, v_due.event_seq,
                                            v_due.probe, v_due.own_inserted, v_due.xids);
                IF v_row.tick_id IS NOT NULL THEN
                    v_plan := v_plan || v_row;
                ELSIF v_debug > 0 THEN
                    -- Why tick_prepare skipped it: its tick lock's holder, if any.
                    v_skips := concat_ws('; ', v_skips, format('%s: %s', v_due.queue_name, coalesce(
                        (SELECT string_agg(format('tick lock held by pid %s (%s, %s, xact %s ms old: %s)',
                                                  a.pid, a.application_name, a.state,
                                                  round((extract(epoch FROM clock_timestamp() - a.xact_start) * 1000)::numeric, 1),
                                                  left(a.query, 80)), ', ')
                           FROM pg_catalog.pg_locks l
                           JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
                          WHERE l.locktype = 'advisory' AND l.classid = pgque.lock_id_queue_tick_class()::oid
                            AND l.objid = v_due.queue_id::oid AND l.objsubid = 2
                            AND l.granted AND l.pid <> pg_backend_pid()
                            -- advisory locks are per database; queue ids repeat across them
                            AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                                               WHERE d.datname = pg_catalog.current_database())),
                        'a newer tick than the due check read (another ticker), or the queue is gone')));
                END IF;
                IF v_debug > 0 AND extract(epoch FROM clock_timestamp() - v_t_q) * 1000 > v_slow_ms THEN
                    v_slow_ms := extract(epoch FROM clock_timestamp() - v_t_q) * 1000;
                    v_slow_q := v_due.queue_name;
                END IF;
            EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                RAISE LOG 'pgque: ticker skipped queue % this round: %', v_due.queue_name, SQLERRM;
            END;
        END LOOP;
    EXCEPTION WHEN lock_not_available OR deadlock_detected OR undefined_table OR internal_error THEN
        IF v_debug > 0 THEN
            RAISE LOG 'pgque: ticker_plan fell back to checking queue by queue: % (%)', SQLERRM, SQLSTATE;
        END IF;
        -- Some queue's objects are locked (being dropped or altered) and the
        -- set-based check could not read them, or a queue read before a
        -- concurrent drop_queue() committed has lost its relations ("could
        -- not open relation with OID", internal_error): check queue by
        -- queue instead, each with a fresh snapshot.
        v_plan := '{}';
        FOR v_qid IN SELECT q.queue_id FROM pgque.queue q ORDER BY q.queue_id LOOP
            BEGIN
                SELECT d.last_tick_id, d.event_seq, d.quiet INTO v_last, v_seq, v_quiet FROM pgque.due_queues(v_qid) d;
                IF FOUND THEN
                    v_due_n := v_due_n + 1;
                    v_probe := false;
                    v_own := false;
                    v_xids := NULL;
                    IF NOT v_quiet THEN
                        SELECT f.probe, f.own_inserted, f.xids INTO v_probe, v_own, v_xids
                          FROM pgque.tick_in_flight(ARRAY[v_qid]) f;
                    END IF;
                    v_row := pgque.tick_prepare(v_qid, v_last, v_seq, v_probe, v_own, v_xids);
                    IF v_row.tick_id IS NOT NULL THEN
                        v_plan := v_plan || v_row;
                    END IF;
                END IF;
            EXCEPTION
                WHEN lock_not_available OR deadlock_detected THEN
                    RAISE LOG 'pgque: ticker skipped queue id % this round: %', v_qid, SQLERRM;
                WHEN undefined_table OR internal_error THEN
                    -- Dropped meanwhile: skip it. Anything else is a real error.
                    IF EXISTS (SELECT 1 FROM pgque.queue q WHERE q.queue_id = v_qid) THEN
                        RAISE;
                    END IF;
                    RAISE LOG 'pgque: ticker skipped queue id % this round: dropped meanwhile (%)', v_qid, SQLERRM;
            END;
        END LOOP;
    END;
    -- For ticker_idle(): the snapshot read before the check (anything
    -- committed since makes the next call check in full). Nothing due and
    -- the same snapshot as the previous call's: the installation has gone
    -- quiet; record until when (ticker_idle_until; its reads are later than
    -- the snapshot, so what it may have seen on top is in the next one).
    -- Otherwise only the snapshot ('seen'), so that a busy installation
    -- pays no ticker_idle_until; so too in a transaction that wrote (its
    -- own writes are not in the snapshot).
    -- The push state (ticker_push_idle_until) needs no second look: only
    -- when no queue was due at all (not even one skipped on a lock), and
    -- not in a transaction that wrote.
    IF cardinality(v_plan) = 0 AND pg_current_xact_id_if_assigned() IS NULL THEN
        -- they read the tick tables: a rotation holding them past the
        -- ticker's lock_timeout leaves 'seen' (the next call checks in
        -- full), never an error that would end a ticker_loop run
        BEGIN
            IF split_part(v_idle, '|', 2) = v_fp THEN
                v_until := pgque.ticker_idle_until();
            END IF;
            IF v_due_n = 0 THEN
                v_push := pgque.ticker_push_idle_until();
            END IF;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            v_until := NULL;
            v_push := NULL;
        END;
    END IF;
    PERFORM set_config('pgque.ticker_idle',
                       coalesce(extract(epoch FROM v_until)::float8::text, 'seen') || '|' || v_fp
                       || '|' || coalesce(extract(epoch FROM v_push)::float8::text, ''), false);
    PERFORM set_config('lock_timeout', v_timeout, true);
    IF v_debug > 0 AND (v_skips IS NOT NULL
                        OR extract(epoch FROM clock_timestamp() - v_t0) * 1000 > v_debug) THEN
        RAISE LOG 'pgque: ticker_plan() took % ms (over ticker_debug_round_ms=%, or it skipped a due queue): due check % ms (% queues due), % ticks prepared, slowest tick_prepare % ms (%); skipped: %',
            round((extract(epoch FROM clock_timestamp() - v_t0) * 1000)::numeric, 1), v_debug,
            round((extract(epoch FROM coalesce(v_t_due, clock_timestamp()) - v_t0) * 1000)::numeric, 1), v_n_due,
            cardinality(v_plan), round(v_slow_ms::numeric, 1), coalesce(v_slow_q, 'none'), coalesce(v_skips, 'none');
    END IF;
    RETURN v_plan;
END;
$$;
