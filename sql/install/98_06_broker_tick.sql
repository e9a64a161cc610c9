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
-- Writes: tick (insert). Called by: broker_tick(i_queue_name, i_txids)
-- (the overload below, which the broker calls right after its pushes
-- commit: it skips the tick when an existing tick already sees i_txids);
-- tests.
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

-- pgque.broker_tick(i_queue_name, i_txids): tick one queue unless a tick
-- already covers the given transactions - the broker's tick after pushes
-- committed. A tick covers a committed transaction when its snapshot sees
-- it: the transaction's events are then in the batches up to that tick
-- (batches are snapshot differences), so a further tick would add nothing
-- for it. Each push answers with its transaction id; the broker passes the
-- ids of the committed pushes still waiting, and when the queue's latest
-- tick (any ticker's: the scheduled ticker's, another broker's, or the
-- tick that was in flight when the pushes committed) sees them all, this
-- returns that tick without ticking: no lock, no write, no pg_locks read.
-- Otherwise it ticks as broker_tick(queue) does.
-- Params: i_queue_name; i_txids: committed transaction ids (bigint, as
-- pg_current_xact_id()); NULL or empty ticks unconditionally.
-- Returns: tick_id (NULL as broker_tick(queue): not ticked), its snapshot
-- (the Go side checks later pushes against it), ticked (false: an existing
-- tick covers i_txids).
-- Must run in READ COMMITTED (raises otherwise). An unknown queue raises
-- "no such queue" (undefined_object), a negative txid
-- invalid_parameter_value.
-- Locks: none when covered; else as broker_tick(queue). Writes: none when
-- covered; else tick (insert). Called by: the broker (internal/httpapi
-- ticks.go) after its pushes commit.
CREATE OR REPLACE FUNCTION pgque.broker_tick(i_queue_name text, i_txids bigint[],
    OUT tick_id bigint, OUT tick_snapshot pg_snapshot, OUT ticked boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_qid int;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgque: broker_tick() must run in READ COMMITTED, not %', upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'A tick records the current snapshot; call it in its own READ COMMITTED transaction.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(i_txids) x WHERE x < 0) THEN
        RAISE EXCEPTION 'pgque: broker_tick: transaction ids are non-negative (pg_current_xact_id()), got %', i_txids
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT q.queue_id INTO v_qid FROM pgque.queue q WHERE q.queue_name = i_queue_name;
    IF v_qid IS NOT NULL AND coalesce(cardinality(i_txids), 0) > 0 AND array_position(i_txids, NULL) IS NULL THEN
        SELECT t.tick_id, t.tick_snapshot INTO tick_id, tick_snapshot
          FROM pgque.tick t WHERE t.tick_queue = v_qid ORDER BY t.tick_id DESC LIMIT 1;
        IF tick_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM unnest(i_txids) x
                            WHERE NOT pg_visible_in_snapshot(x::text::xid8, tick_snapshot)) THEN
            ticked := false;
            RETURN;
        END IF;
    END IF;
    tick_id := pgque.broker_tick(i_queue_name); -- raises for an unknown queue
    tick_snapshot := NULL;
    ticked := tick_id IS NOT NULL;
    IF ticked THEN
        SELECT t.tick_snapshot INTO tick_snapshot
          FROM pgque.tick t WHERE t.tick_queue = v_qid AND t.tick_id = broker_tick.tick_id;
    END IF;
END;
$$;
