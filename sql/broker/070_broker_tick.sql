-- pgque.broker_tick(i_queue_name): tick one queue now, whatever its
-- thresholds say - what force_next_tick + ticker(queue) do, without writing
-- the queue row (no forced flag to set and clear: the queue row stays
-- untouched unless somebody else had forced it, which the tick clears).
-- The same as broker_tick(i_queue_name, NULL) (below), which holds the
-- code: returns its tick_id.
-- Called by: tests, and whoever wants a tick now whatever the snapshots
-- say (the broker calls broker_tick(i_queue_name, i_txids)).
--
-- pgque.broker_tick(i_queue_name, i_txids): the broker's tick after its
-- pushes committed - none when a tick already covers them. A tick covers a
-- committed transaction when its snapshot sees it: the transaction's
-- events are then in the batches up to that tick (batches are snapshot
-- differences), so a further tick would add nothing for it. Each push
-- answers with its transaction id; the broker passes the ids of the
-- committed pushes still waiting, and when the queue's latest tick (any
-- ticker's: the scheduled ticker's, another broker's, the tick that was in
-- flight when the pushes committed) sees them all, this returns that tick
-- without ticking: no lock, no write, no pg_locks read. i_txids NULL,
-- empty or holding a NULL: tick whatever the snapshots say.
-- Otherwise it ticks. It follows ticker(queue)'s order (tick_queue's
-- visibility rules): the event sequence is read, then pg_locks
-- (tick_in_flight; not when the queue is quiet, see due_queues), then
-- tick_queue takes the snapshot. Paused queues and queues with an
-- external ticker are not ticked (NULL), as ticker() leaves them.
-- When another session holds the queue's tick lock (a scheduled ticker,
-- another broker) or ticked first, its tick may predate the caller's
-- commit: broker_tick waits for that session (at most 500 ms per attempt)
-- and then checks again whether that session's tick covers i_txids (it
-- usually does: no second tick), else ticks after it, up to 3 attempts,
-- instead of returning at once and leaving the broker to retry after a
-- sleep.
-- Params: i_queue_name; i_txids: committed transaction ids (bigint, as
-- pg_current_xact_id()).
-- Returns: tick_id (NULL when the queue could not be ticked in 3 attempts:
-- its tick lock held longer than 500 ms, e.g. by a rotation), its
-- snapshot (the broker checks later pushes against it), ticked (false: an
-- existing tick covers i_txids).
-- Must run in READ COMMITTED (raises otherwise). An unknown queue raises
-- "no such queue" (undefined_object), a negative txid
-- invalid_parameter_value.
-- Locks: none when covered at once; else the shared advisory lock
-- (pgque.lock_id_class(), pgque.lock_id_ticking()) for the transaction (a ticker, for tick_queue's pg_locks
-- reading), then as tick_queue (advisory (pgque.lock_id_queue_tick_class(), queue)), waited for
-- (lock_timeout 500 ms) after a skipped attempt and then held to the end
-- of the transaction.
-- Writes: tick (insert), none when covered. Called by: the broker (internal/httpapi
-- ticks.go) after its pushes commit; broker_tick(i_queue_name).
CREATE OR REPLACE FUNCTION pgque.broker_tick(i_queue_name text, i_txids bigint[],
    OUT tick_id bigint, OUT tick_snapshot pg_snapshot, OUT ticked boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_check boolean := coalesce(cardinality(i_txids), 0) > 0 AND array_position(i_txids, NULL) IS NULL;
    v_last  bigint;
    v_seq   bigint;
    v_f     record;
    v_l     record;
    v_tick  bigint;
    v_lt    text;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(i_txids) x WHERE x < 0) THEN
        RAISE EXCEPTION 'pgque: broker_tick: transaction ids are non-negative (pg_current_xact_id()), got %', i_txids
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
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
    ticked := false;
    FOR v_try IN 1..3 LOOP
        -- 0. covered already (on later attempts: by the tick of the session
        -- we waited for)?
        IF v_check THEN
            SELECT t.tick_id, t.tick_snapshot INTO tick_id, tick_snapshot
              FROM pgque.tick t WHERE t.tick_queue = v_queue.queue_id ORDER BY t.tick_id DESC LIMIT 1;
            IF FOUND AND NOT EXISTS (SELECT 1 FROM unnest(i_txids) x
                                      WHERE NOT pg_visible_in_snapshot(x::text::xid8, tick_snapshot)) THEN
                RETURN;
            END IF;
            tick_id := NULL;
            tick_snapshot := NULL;
        END IF;
        IF v_queue.queue_ticker_paused OR v_queue.queue_external_ticker THEN
            RETURN;
        END IF;
        IF v_try = 1 THEN
            PERFORM pg_advisory_xact_lock_shared(pgque.lock_id_class(), pgque.lock_id_ticking());
        END IF;
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
        IF v_tick IS NOT NULL THEN
            tick_id := v_tick;
            ticked := true;
            SELECT t.tick_snapshot INTO tick_snapshot
              FROM pgque.tick t WHERE t.tick_queue = v_queue.queue_id AND t.tick_id = v_tick;
            RETURN;
        END IF;
        IF v_try = 3 THEN
            RETURN;
        END IF;
        -- Skipped: wait until the other ticker's transaction ends (its tick
        -- is then visible), holding its lock from then on, and try again.
        v_lt := current_setting('lock_timeout');
        BEGIN
            PERFORM set_config('lock_timeout', '500ms', true);
            PERFORM pg_advisory_xact_lock(pgque.lock_id_queue_tick_class(), v_queue.queue_id);
        EXCEPTION WHEN lock_not_available THEN
            NULL; -- held longer: try again (the try lock will likely skip)
        END;
        PERFORM set_config('lock_timeout', v_lt, true);
    END LOOP;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.broker_tick(i_queue_name text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_tick bigint;
BEGIN
    SELECT b.tick_id INTO v_tick FROM pgque.broker_tick(i_queue_name, NULL::bigint[]) b;
    RETURN v_tick;
END;
$$;
