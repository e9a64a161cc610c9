-- pgque.event_retry(x_batch_id, x_event_id, x_retry_time | x_retry_seconds):
-- schedule an event of an open batch to be delivered again to this consumer
-- only, at the given time. The event is re-read from the batch; the copy in
-- the retry queue keeps its ev_id and retry count (maint_retry_events adds 1).
-- Returns: 1 scheduled, 0 unknown batch or the event is not in it.
-- Locks: the subscription's batch lock. Writes: retry_queue.
-- Called by: nack(), PgQ-style consumers.
CREATE OR REPLACE FUNCTION pgque.event_retry(x_batch_id bigint, x_event_id bigint, x_retry_time timestamptz)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub pgque.subscription;
BEGIN
    v_sub := pgque.lock_batch(x_batch_id);
    IF v_sub.sub_id IS NULL THEN
        RETURN 0;
    END IF;
    INSERT INTO pgque.retry_queue (ev_retry_after, ev_queue, ev_id, ev_time, ev_txid, ev_owner, ev_retry,
                                   ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_partition)
    SELECT coalesce(x_retry_time, now()), v_sub.sub_queue, e.ev_id, e.ev_time, e.ev_txid, v_sub.sub_id,
           e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4, e.ev_partition
      FROM pgque.batch_event_rows(v_sub, NULL, 1, x_event_id) e
    ON CONFLICT (ev_owner, ev_id) DO NOTHING;
    RETURN CASE WHEN FOUND THEN 1 ELSE 0 END;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.event_retry(x_batch_id bigint, x_event_id bigint, x_retry_seconds int)
RETURNS int
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT pgque.event_retry(x_batch_id, x_event_id, now() + make_interval(secs => coalesce(x_retry_seconds, 0)));
$$;
