-- pgque.maint_retry_events(): move retry rows whose time has come back into
-- their queue's current event table (same ev_id, ev_owner kept so only that
-- consumer sees them, ev_retry + 1, a new txid so a later batch carries
-- them). Set-based, up to 10,000 rows per call; call until it returns 0.
-- The moved rows keep their ev_id, so by itself the event sequence would
-- not move and no tick would be due for them (docs/design/engine.md, "Visibility
-- and re-ticks"): after inserting, it advances the queue's event sequence by
-- the number of rows moved, which makes the queue due at the next tick and
-- keeps tick deltas an upper bound of a batch's rows. The order matters:
-- the INSERT (which takes the event table's lock and an xid) comes first, so
-- a tick that counts the advanced sequence also sees this transaction in
-- flight (tick_queue) or sees its rows.
-- The queue row is read FOR SHARE: a table switch (step 1) in progress is
-- waited for and the current table re-read, and none starts before this
-- commits, so rows never land in a table the switch already left behind (a
-- REPEATABLE READ caller whose snapshot predates a switch gets a
-- serialization error instead).
-- When nothing is due it is one index probe and writes nothing.
-- Returns: rows moved. Locks: the queue rows (FOR SHARE), the moved retry
-- rows (SKIP LOCKED). Writes: retry_queue (delete), event tables (insert),
-- the event sequences.
-- Called by: ticker() (every call), maint(), drain_retry_events(), the
-- ticker daemon.
CREATE OR REPLACE FUNCTION pgque.maint_retry_events()
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_qid   int;
    v_queue pgque.queue;
    v_n     int;
    v_total int := 0;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgque.retry_queue r WHERE r.ev_retry_after <= now()) THEN
        RETURN 0;
    END IF;
    FOR v_qid IN
        SELECT DISTINCT r.ev_queue FROM pgque.retry_queue r WHERE r.ev_retry_after <= now() ORDER BY 1
    LOOP
        SELECT * INTO v_queue FROM pgque.queue q WHERE q.queue_id = v_qid FOR SHARE;
        CONTINUE WHEN NOT FOUND;
        EXECUTE format(
            'WITH due AS ('
            '  DELETE FROM pgque.retry_queue r WHERE (r.ev_owner, r.ev_id) IN ('
            '    SELECT r2.ev_owner, r2.ev_id FROM pgque.retry_queue r2'
            '     WHERE r2.ev_queue = $1 AND r2.ev_retry_after <= now()'
            '     ORDER BY r2.ev_retry_after LIMIT $2 FOR UPDATE SKIP LOCKED)'
            '  RETURNING r.*)'
            ' INSERT INTO %s (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_partition)'
            ' SELECT ev_id, ev_time, ev_owner, coalesce(ev_retry, 0) + 1, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_partition'
            '   FROM due ORDER BY ev_id',
            pgque.event_table(v_queue.queue_id, v_queue.queue_cur_table))
        USING v_queue.queue_id, 10000 - v_total;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
            PERFORM nextval(v_queue.queue_event_seq) FROM generate_series(1, v_n);
        END IF;
        v_total := v_total + v_n;
        EXIT WHEN v_total >= 10000;
    END LOOP;
    RETURN v_total;
END;
$$;
