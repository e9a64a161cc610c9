-- pgque.tick_prepare(i_queue_id, i_last_tick_id, i_event_seq, i_probe,
-- i_own_inserted, i_xids): prepare one tick for a queue (the caller INSERTs
-- the returned row into pgque.tick: tick_queue, ticker()), unless another session
-- holds the queue's tick lock (then skip: NULL) or a tick newer than
-- i_last_tick_id appeared meanwhile (another ticker won). Records the event
-- sequence's position i_event_seq (tick_event_seq), the snapshot
-- (tick_snapshot) and the producers still in flight (tick_wait,
-- tick_wait_probe), clears a forced tick, and NOTIFYs the queue's channel
-- (pgque.queue_channel: pgque_<queue> up to 57 bytes) when the tick carries
-- new event ids or the previous tick waited for producers in flight (this
-- one may carry their events), and the notify queue is not backed up (a
-- stalled listener must not fill it).
--
-- Visibility (docs/design/engine.md, "Visibility and re-ticks"): an event id can be
-- counted by a tick (ev_id <= tick_event_seq) while its transaction is not
-- visible in the tick's snapshot (its xid is in xip, or >= xmax - it got its
-- xid after the snapshot, or after the ticker's own xid). Such an event is
-- in the first later batch whose end tick sees it; due_queues must make that
-- tick happen within one period of the producer's commit. So a tick records
-- who may have left events behind, in this order:
--   1. the caller read the sequence: i_event_seq (due_queues' cur_seq);
--   2. then it read pg_locks (tick_in_flight): i_xids, i_probe,
--      i_own_inserted - every producer whose id was counted at 1 and that
--      has not committed by 3 was a lock holder at 2;
--   3. this function takes the snapshot;
--   tick_wait = i_xids (widened to xid8) that the snapshot does not see (a
--   holder that ended before 3 is visible, or aborted), plus this
--   transaction's own xid if it inserted events of the queue (send and
--   ticker() in one transaction); tick_wait_probe = i_probe.
-- Refuses to run outside READ COMMITTED: a REPEATABLE READ ticker would
-- record a snapshot older than the previous tick's (ticks only move forward).
-- Writes nothing in the usual case, so that a caller can prepare inside an
-- exception block (a subtransaction) and INSERT outside it: a write inside
-- a block assigns the subtransaction an xid, and every such xid lengthens
-- the tick's commit record (ticker_loop at 100 Hz: ~2 KiB/s of WAL). It
-- draws the tick id (nextval: no subtransaction xid) and takes, besides the
-- tick lock, ROW EXCLUSIVE on pgque.tick and on the child the row goes to,
-- so that the caller's INSERT never waits on a lock (a rotation's
-- TRUNCATE); a forced tick's flag is cleared here (the only write, rare).
-- Returns: the pgque.tick row to insert, or NULL (all columns NULL).
-- Locks: advisory (pgque.lock_id_queue_tick_class(), queue_id), non-blocking; ROW EXCLUSIVE on
-- pgque.tick and pgque.tick_<gen>, waited for (the caller's lock_timeout).
-- Writes: queue (only to clear a forced tick); NOTIFY pgque.queue_channel(name).
-- Called by: tick_queue, ticker_plan.
CREATE OR REPLACE FUNCTION pgque.tick_prepare(i_queue_id int, i_last_tick_id bigint, i_event_seq bigint,
                                              i_probe boolean, i_own_inserted boolean, i_xids bigint[])
RETURNS pgque.tick
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue   pgque.queue;
    v_last    record;
    v_seq     bigint;
    v_snap    pg_snapshot;
    v_xmax    bigint;
    v_wait    xid8[];
    v_row     pgque.tick;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgque: ticker() must run in READ COMMITTED, not %', upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'A tick records the current snapshot; in REPEATABLE READ or SERIALIZABLE it could be older than the previous tick. Call the ticker in its own READ COMMITTED transaction.';
    END IF;
    IF NOT pg_try_advisory_xact_lock(pgque.lock_id_queue_tick_class(), i_queue_id) THEN
        RETURN NULL::pgque.tick;
    END IF;
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    IF NOT FOUND THEN
        RETURN NULL::pgque.tick;
    END IF;
    SELECT t.tick_id, t.tick_event_seq, t.tick_wait IS NOT NULL OR t.tick_wait_probe AS left_behind INTO v_last
      FROM pgque.tick t WHERE t.tick_queue = i_queue_id
     ORDER BY t.tick_id DESC LIMIT 1;
    IF v_last.tick_id IS DISTINCT FROM i_last_tick_id THEN
        RETURN NULL::pgque.tick;
    END IF;

    v_seq := greatest(i_event_seq, coalesce(v_last.tick_event_seq, 0));

    -- 3. The snapshot; tick_wait = the holders' xids it does not see.
    v_snap := pgque.tick_snapshot();
    v_xmax := pg_snapshot_xmax(v_snap)::text::bigint;
    IF coalesce(cardinality(i_xids), 0) > 0 OR i_own_inserted THEN
        SELECT array_agg(DISTINCT f ORDER BY f) INTO v_wait
          FROM (SELECT (v_xmax + CASE WHEN d >= 2147483648 THEN d - 4294967296 ELSE d END)::text::xid8 AS f
                  FROM (SELECT ((x - v_xmax % 4294967296) % 4294967296 + 4294967296) % 4294967296 AS d
                          FROM unnest(i_xids) x) a
                UNION ALL
                SELECT pg_current_xact_id() WHERE i_own_inserted) b
         WHERE NOT pg_visible_in_snapshot(f, v_snap);
    END IF;

    v_row.tick_gen := pgque.tick_gen(now());
    v_row.tick_queue := i_queue_id;
    v_row.tick_id := nextval(v_queue.queue_tick_seq);
    v_row.tick_time := now();
    v_row.tick_snapshot := v_snap;
    v_row.tick_event_seq := v_seq;
    v_row.tick_new_ids := greatest(v_seq - coalesce(v_last.tick_event_seq, 0), 0);
    v_row.tick_wait := v_wait;
    v_row.tick_wait_probe := coalesce(i_probe, false);
    -- The caller's INSERT must not wait (it may run outside any exception
    -- block): take its locks now, under the caller's lock_timeout.
    LOCK TABLE ONLY pgque.tick IN ROW EXCLUSIVE MODE;
    CASE v_row.tick_gen
        WHEN 0 THEN LOCK TABLE ONLY pgque.tick_0 IN ROW EXCLUSIVE MODE;
        WHEN 1 THEN LOCK TABLE ONLY pgque.tick_1 IN ROW EXCLUSIVE MODE;
        ELSE LOCK TABLE ONLY pgque.tick_2 IN ROW EXCLUSIVE MODE;
    END CASE;
    IF v_queue.queue_force_tick THEN
        UPDATE pgque.queue SET queue_force_tick = false WHERE queue_id = i_queue_id;
    END IF;
    IF (v_seq > coalesce(v_last.tick_event_seq, 0) OR v_last.left_behind)
       AND pg_notification_queue_usage() <= coalesce(pgque.get_setting('notify_max_queue_usage')::float8, 0.001)
    THEN
        PERFORM pg_notify(pgque.queue_channel(v_queue.queue_name), v_row.tick_id::text);
    END IF;
    RETURN v_row;
END;
$$;
