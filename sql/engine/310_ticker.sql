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
-- A call that finds the installation idle (ticker_idle: nothing committed
-- anywhere since this session's last due check found nothing due, and no
-- tick or retry due by time yet; or, with no classic consumer, no tick due
-- by time yet and no ticker_wake row: events alone do not end that state)
-- returns 0 without a due check.
-- The work is ticker_plan (everything but the writes) and one INSERT of its
-- rows; ticker_loop calls the two itself, the plan in an exception block
-- and the INSERT outside it (no subtransaction xid in a tick's commit).
-- Returns: how many queues were ticked. Locks: as ticker_plan (per queue
-- its tick lock; the shared advisory lock (pgque.lock_id_class(), pgque.lock_id_ticking()) for the
-- transaction); retry rows and the queue rows they go to, as
-- maint_retry_events.
-- Writes: tick; retry_queue and event tables when retries are due.
-- Called by: ticker_loop(), the ticker daemon, cron, users.
--
-- pgque.ticker(i_queue_name): tick one queue if due. Returns: the new tick
-- id, or NULL when none was due (or another session is ticking it). An
-- unknown queue raises "no such queue" (PgQue's message, clients match on
-- it), a paused queue or one with an external tick source raises too; all
-- three with SQLSTATE P0001, as PgQue (its clients catch raise_exception).
CREATE OR REPLACE FUNCTION pgque.ticker()
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_plan    pgque.tick[];
    v_timeout text;
BEGIN
    -- Nothing committed since a check that found nothing due, and nothing
    -- due by time yet: no tick, no retry (ticker_idle).
    IF pgque.ticker_idle() THEN
        -- ... and no queue or setting change, no subscribe committed since
        -- (ticker_wake; the caller's half of ticker_idle's push state).
        IF NOT EXISTS (SELECT FROM pgque.ticker_wake) THEN
            RETURN 0;
        END IF;
    END IF;
    v_plan := pgque.ticker_plan();
    IF cardinality(v_plan) > 0 THEN
        INSERT INTO pgque.tick SELECT * FROM unnest(v_plan);
    END IF;
    -- Retries, after the ticks: rows moved now are ticked by the next call.
    IF EXISTS (SELECT 1 FROM pgque.retry_queue r WHERE r.ev_retry_after <= now()) THEN
        v_timeout := current_setting('lock_timeout');
        PERFORM set_config('lock_timeout', coalesce(pgque.get_setting('ticker_lock_timeout_ms'), '20') || 'ms', true);
        BEGIN
            PERFORM pgque.maint_retry_events();
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            RAISE LOG 'pgque: ticker did not move retries this round: %', SQLERRM;
        END;
        PERFORM set_config('lock_timeout', v_timeout, true);
    END IF;
    RETURN coalesce(cardinality(v_plan), 0);
END;
$$;

CREATE OR REPLACE FUNCTION pgque.ticker(i_queue_name text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue_id int;
    v_paused   boolean;
    v_external boolean;
    v_last     bigint;
    v_seq      bigint;
    v_probe    boolean;
    v_own      boolean;
    v_xids     bigint[];
    v_quiet    boolean;
BEGIN
    SELECT q.queue_id, q.queue_ticker_paused, q.queue_external_ticker INTO v_queue_id, v_paused, v_external
      FROM pgque.queue q WHERE q.queue_name = i_queue_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgque: no such queue: "%"', i_queue_name
            USING ERRCODE = 'raise_exception', HINT = 'Create it with pgque.create_queue(name).';
    END IF;
    IF v_external THEN
        RAISE EXCEPTION 'pgque: queue "%" has an external tick source (external_ticker)', i_queue_name
            USING ERRCODE = 'raise_exception',
                  HINT = format('SELECT pgque.set_queue_config(%L, ''external_ticker'', ''false'') lets the ticker tick it.', i_queue_name);
    END IF;
    IF v_paused THEN
        RAISE EXCEPTION 'pgque: ticker has been paused for queue "%"', i_queue_name
            USING ERRCODE = 'raise_exception',
                  HINT = format('SELECT pgque.set_queue_config(%L, ''ticker_paused'', ''false'') resumes it.', i_queue_name);
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgque: ticker() must run in READ COMMITTED, not %', upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'A tick records the current snapshot; in REPEATABLE READ or SERIALIZABLE it could be older than the previous tick. Call the ticker in its own READ COMMITTED transaction.';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(pgque.lock_id_class(), pgque.lock_id_ticking());
    SELECT d.last_tick_id, d.event_seq, d.quiet INTO v_last, v_seq, v_quiet FROM pgque.due_queues(v_queue_id) d;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- A quiet queue (due_queues) has nobody in flight: no pg_locks read.
    IF NOT v_quiet THEN
        SELECT f.probe, f.own_inserted, f.xids INTO v_probe, v_own, v_xids
          FROM pgque.tick_in_flight(ARRAY[v_queue_id]) f;
    END IF;
    RETURN pgque.tick_queue(v_queue_id, v_last, v_seq, v_probe, v_own, v_xids);
END;
$$;
