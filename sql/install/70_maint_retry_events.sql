-- pgque.maint_retry_events(): move retry rows whose time has come back into
-- their queue's current event table (same ev_id, ev_owner kept so only that
-- consumer sees them, ev_retry + 1, a new txid so a later batch carries
-- them). Set-based, up to 10,000 rows per call; call until it returns 0.
-- Returns: rows moved. Locks: the moved retry rows (SKIP LOCKED).
-- Writes: retry_queue (delete), event tables (insert).
-- Called by: maint(), drain_retry_events(), the ticker daemon.
CREATE OR REPLACE FUNCTION pgque.maint_retry_events()
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_n     int;
    v_total int := 0;
BEGIN
    FOR v_queue IN
        SELECT q.* FROM pgque.queue q
         WHERE EXISTS (SELECT 1 FROM pgque.retry_queue r WHERE r.ev_queue = q.queue_id AND r.ev_retry_after <= now())
    LOOP
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
        v_total := v_total + v_n;
        EXIT WHEN v_total >= 10000;
    END LOOP;
    RETURN v_total;
END;
$$;
