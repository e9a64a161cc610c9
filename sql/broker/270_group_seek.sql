-- pgque.group_seek(i_queue, i_group, i_to_end, i_timestamp): move a consumer
-- group on a queue: i_to_end -> every partition to the current snapshot
-- (what is committed is skipped); else i_timestamp -> every partition back or forward
-- to the events created at or after i_timestamp (still retained). Live
-- leases are dropped (their acks then fail). The group's subscription moves
-- the same way, so partitions it reaches later follow. A group with no
-- subscription yet is subscribed. Exactly one of i_to_end / i_timestamp.
-- Returns: cursors moved. Locks: the group's cursor rows (waits for
-- running claims). Writes: group_cursor, group_subscription.
-- Called by: the broker (POST .../consumer-groups/:group/queues/:queue/seek,
-- .../subscription).
CREATE OR REPLACE FUNCTION pgque.group_seek(i_queue text, i_group text, i_to_end boolean, i_timestamp timestamptz)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue := pgque.find_queue(i_queue);
    v_group int;
    v_snap  pg_snapshot;
    v_n     int;
BEGIN
    IF coalesce(i_to_end, false) = (i_timestamp IS NOT NULL) THEN
        RAISE EXCEPTION 'pgque: seek needs either toEnd or a timestamp'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_group := pgque.group_subscribe(v_queue.queue_id, i_group, 'new', NULL);
    -- to the end: the current snapshot (what is committed now is skipped,
    -- a transaction in flight is in its xip and still delivered)
    v_snap := CASE WHEN i_to_end THEN pg_current_snapshot() ELSE '1:1:'::pg_snapshot END;
    PERFORM 1 FROM pgque.group_cursor gc WHERE gc.gc_queue = v_queue.queue_id AND gc.gc_group = v_group FOR UPDATE;
    UPDATE pgque.group_cursor gc
       SET gc_lo = v_snap, gc_hi = v_snap, gc_tick = NULL, gc_pos_txid = NULL, gc_pos = NULL,
           gc_from = i_timestamp, gc_lease = NULL, gc_lease_until = NULL, gc_end_txid = NULL, gc_lease_end = NULL,
           gc_attempts = 0, gc_fail_ev = NULL, gc_fails = 0, gc_active = now()
     WHERE gc.gc_queue = v_queue.queue_id AND gc.gc_group = v_group;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    UPDATE pgque.group_subscription
       SET gs_lo = v_snap, gs_from = i_timestamp, gs_mode = CASE WHEN i_to_end THEN 'new' ELSE 'from' END
     WHERE gs_queue = v_queue.queue_id AND gs_group = v_group;
    RETURN v_n;
END;
$$;
