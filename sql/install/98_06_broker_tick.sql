-- pgque.broker_tick(i_queue_name): tick one queue now, whatever its
-- thresholds say - what force_next_tick + ticker(queue) do, without writing
-- the queue row (no forced flag to set and clear: the queue row stays
-- untouched unless somebody else had forced it, which the tick clears). It
-- follows ticker(queue)'s order (tick_queue's visibility rules): the event
-- sequence is read, then pg_locks (tick_in_flight; not when the queue is
-- quiet, see due_queues), then tick_queue takes the snapshot. Paused
-- queues and queues with an external ticker are not ticked (NULL), as
-- ticker() leaves them.
-- Must run in READ COMMITTED (raises otherwise). An unknown queue raises
-- "no such queue" (undefined_object).
-- When another session holds the queue's tick lock (a scheduled ticker,
-- another broker) or ticked first, its tick may predate the caller's
-- commit: broker_tick waits for that session (at most 500 ms per attempt)
-- and ticks again after it, up to 3 attempts, instead of returning at once
-- and leaving the broker to retry after a sleep.
-- Returns: the new tick id, or NULL when the queue could not be ticked in
-- 3 attempts (its tick lock held longer than 500 ms, e.g. by a rotation).
-- Locks: the shared advisory lock (1885827445, 6) for the transaction (a
-- ticker, for tick_queue's pg_locks reading), then as tick_queue (advisory
-- (1885827446, queue)), waited for (lock_timeout 500 ms) after a skipped
-- attempt and then held to the end of the transaction.
-- Writes: tick (insert). Called by: the broker, right after its push
-- commits (internal/httpapi ticks.go).
CREATE OR REPLACE FUNCTION pgque.broker_tick(i_queue_name text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_last  bigint;
    v_seq   bigint;
    v_f     record;
    v_l     record;
    v_tick  bigint;
    v_lt    text;
BEGIN
    SELECT * INTO v_queue FROM pgque.queue q WHERE q.queue_name = i_queue_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgque: no such queue: "%"', i_queue_name
            USING ERRCODE = 'undefined_object', HINT = 'Create it with pgque.create_queue(name).';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgque: broker_tick() must run in READ COMMITTED, not %', upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'A tick records the current snapshot; call it in its own READ COMMITTED transaction.';
    END IF;
    IF v_queue.queue_ticker_paused OR v_queue.queue_external_ticker THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(1885827445, 6);
    FOR v_try IN 1..3 LOOP
        -- 1. the event sequence (no write), with the latest tick id.
        v_seq := coalesce(pg_sequence_last_value(v_queue.queue_event_seq), 0);
        SELECT t.tick_id, t.tick_event_seq, t.tick_wait IS NULL AND NOT t.tick_wait_probe AS clean INTO v_l
          FROM pgque.tick t WHERE t.tick_queue = v_queue.queue_id ORDER BY t.tick_id DESC LIMIT 1;
        v_last := v_l.tick_id;
        -- 2. the producers in flight - none when the latest tick waited
        -- for nobody and the sequence has not moved since (due_queues'
        -- "quiet": no pg_locks read); 3. tick_queue takes the snapshot.
        IF v_last IS NOT NULL AND v_l.clean AND v_seq <= v_l.tick_event_seq THEN
            v_tick := pgque.tick_queue(v_queue.queue_id, v_last, v_seq, false, false, NULL);
        ELSE
            SELECT f.probe, f.own_inserted, f.xids INTO v_f FROM pgque.tick_in_flight(ARRAY[v_queue.queue_id]) f;
            v_tick := pgque.tick_queue(v_queue.queue_id, v_last, v_seq, v_f.probe, v_f.own_inserted, v_f.xids);
        END IF;
        IF v_tick IS NOT NULL OR v_try = 3 THEN
            RETURN v_tick;
        END IF;
        -- Skipped: wait until the other ticker's transaction ends (its tick
        -- is then visible), holding its lock from then on, and tick again.
        v_lt := current_setting('lock_timeout');
        BEGIN
            PERFORM set_config('lock_timeout', '500ms', true);
            PERFORM pg_advisory_xact_lock(1885827446, v_queue.queue_id);
        EXCEPTION WHEN lock_not_available THEN
            NULL; -- held longer: try again (the try lock will likely skip)
        END;
        PERFORM set_config('lock_timeout', v_lt, true);
    END LOOP;
    RETURN NULL;
END;
$$;
