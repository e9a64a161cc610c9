-- pgque.ticker(): tick every queue that is due (see due_queues), then move
-- retries whose time has come back into their queues (maint_retry_events:
-- one index probe when none is due, so an idle call writes nothing; rows it
-- moves advance the queue's event sequence, so the next call ticks that
-- queue and a retry is redelivered within about two tick periods of its
-- due time). A queue whose tick would wait on a lock longer than
-- ticker_lock_timeout_ms, or whose tick lock another session holds, is
-- skipped until the next call, so one stuck queue never stalls the others;
-- so is a queue dropped while the call runs (its relations gone).
-- Must run in READ COMMITTED (raises otherwise): a tick records the current
-- snapshot, and ticks must only move forward.
-- Reads pg_locks once per call when some queue is due (tick_in_flight).
-- Returns: how many queues were ticked. Locks: per queue, as tick_queue;
-- the shared advisory lock (1885827445, 6) for the transaction, which marks
-- it as a ticker for other ticks' pg_locks reading (tick_queue); retry rows
-- and the queue rows they go to, as maint_retry_events.
-- Writes: tick; retry_queue and event tables when retries are due.
-- Called by: ticker_loop(), the ticker daemon, cron, users.
--
-- pgque.ticker(i_queue_name): tick one queue if due. Returns: the new tick
-- id, or NULL when none was due (or another session is ticking it). An
-- unknown queue raises "no such queue" (PgQue's message, clients match on it).
CREATE OR REPLACE FUNCTION pgque.ticker()
RETURNS bigint
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
    v_xids    bigint[];
    v_n       bigint := 0;
    v_timeout text := current_setting('lock_timeout');
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgque: ticker() must run in READ COMMITTED, not %', upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'A tick records the current snapshot; in REPEATABLE READ or SERIALIZABLE it could be older than the previous tick. Call the ticker in its own READ COMMITTED transaction.';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(1885827445, 6);
    PERFORM set_config('lock_timeout', coalesce(pgque.get_setting('ticker_lock_timeout_ms'), '20') || 'ms', true);
    BEGIN
        -- In this order (tick_queue): the sequences (due_queues), pg_locks
        -- once for all due queues (tick_in_flight), then each snapshot.
        FOR v_due IN
            WITH d AS MATERIALIZED (SELECT * FROM pgque.due_queues(NULL))
            SELECT d.queue_id, d.queue_name, d.last_tick_id, d.event_seq, f.probe, f.own_inserted, f.xids
              FROM d
              JOIN pgque.tick_in_flight(ARRAY(SELECT d2.queue_id FROM d d2)) f ON f.queue_id = d.queue_id
             ORDER BY d.queue_id
        LOOP
            BEGIN
                IF pgque.tick_queue(v_due.queue_id, v_due.last_tick_id, v_due.event_seq,
                                    v_due.probe, v_due.own_inserted, v_due.xids) IS NOT NULL THEN
                    v_n := v_n + 1;
                END IF;
            EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                RAISE LOG 'pgque: ticker skipped queue % this round: %', v_due.queue_name, SQLERRM;
            END;
        END LOOP;
    EXCEPTION WHEN lock_not_available OR deadlock_detected OR undefined_table OR internal_error THEN
        -- Some queue's objects are locked (being dropped or altered) and the
        -- set-based check could not read them, or a queue read before a
        -- concurrent drop_queue() committed has lost its relations ("could
        -- not open relation with OID", internal_error): check queue by
        -- queue instead, each with a fresh snapshot.
        v_n := 0;
        FOR v_qid IN SELECT q.queue_id FROM pgque.queue q ORDER BY q.queue_id LOOP
            BEGIN
                SELECT d.last_tick_id, d.event_seq INTO v_last, v_seq FROM pgque.due_queues(v_qid) d;
                IF FOUND THEN
                    SELECT f.probe, f.own_inserted, f.xids INTO v_probe, v_own, v_xids
                      FROM pgque.tick_in_flight(ARRAY[v_qid]) f;
                    IF pgque.tick_queue(v_qid, v_last, v_seq, v_probe, v_own, v_xids) IS NOT NULL THEN
                        v_n := v_n + 1;
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
    -- Retries, after the ticks: rows moved now are ticked by the next call.
    IF EXISTS (SELECT 1 FROM pgque.retry_queue r WHERE r.ev_retry_after <= now()) THEN
        BEGIN
            PERFORM pgque.maint_retry_events();
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            RAISE LOG 'pgque: ticker did not move retries this round: %', SQLERRM;
        END;
    END IF;
    PERFORM set_config('lock_timeout', v_timeout, true);
    RETURN v_n;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.ticker(i_queue_name text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue_id int;
    v_last     bigint;
    v_seq      bigint;
    v_probe    boolean;
    v_own      boolean;
    v_xids     bigint[];
BEGIN
    SELECT q.queue_id INTO v_queue_id FROM pgque.queue q WHERE q.queue_name = i_queue_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgque: no such queue: "%"', i_queue_name
            USING ERRCODE = 'undefined_object', HINT = 'Create it with pgque.create_queue(name).';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgque: ticker() must run in READ COMMITTED, not %', upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'A tick records the current snapshot; in REPEATABLE READ or SERIALIZABLE it could be older than the previous tick. Call the ticker in its own READ COMMITTED transaction.';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(1885827445, 6);
    SELECT d.last_tick_id, d.event_seq INTO v_last, v_seq FROM pgque.due_queues(v_queue_id) d;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT f.probe, f.own_inserted, f.xids INTO v_probe, v_own, v_xids
      FROM pgque.tick_in_flight(ARRAY[v_queue_id]) f;
    RETURN pgque.tick_queue(v_queue_id, v_last, v_seq, v_probe, v_own, v_xids);
END;
$$;
