-- pgque.receive_again(i_sub, i_batch_id, i_end_tick, i_sent, i_max_return):
-- the delivery i_batch_id again, for the session that received it and asks
-- again without an ack (a retry, a consumer loop that lost the reply): the
-- same batch id and the same events - the batch's events after the row's
-- position (sub_batch_pos) up to i_sent (NULL: the rest of the batch) up
-- to its end tick i_end_tick - as PgQue returns an unfinished batch again.
-- When i_max_return is smaller than the delivery, the first i_max_return
-- events are returned and the delivery shrinks to them (ack acknowledges
-- exactly what the last receive returned; the rest comes next).
-- The lease restarts (the reader is demonstrably alive).
-- Returns: setof pgque.message. Locks: the caller holds the batch lock.
-- Writes: the delivery sequences (no WAL on PostgreSQL 15+).
-- Called by: receive.
CREATE OR REPLACE FUNCTION pgque.receive_again(i_sub pgque.subscription, i_batch_id bigint, i_end_tick bigint,
                                               i_sent bigint, i_max_return int)
RETURNS SETOF pgque.message
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub   pgque.subscription := i_sub;
    v_rows  pgque.message[];
    v_sent  bigint := i_sent;
    v_limit int := CASE WHEN i_max_return < 2147483647 THEN i_max_return + 1 END;
BEGIN
    v_sub.sub_batch := i_batch_id;
    v_sub.sub_next_tick := i_end_tick;
    -- Events are numbered in ev_id order, so the delivery's events are the
    -- first ones after the position: reading i_max_return + 1 of them and
    -- dropping those past i_sent gives the delivery, or its first
    -- i_max_return events and whether there are more.
    SELECT array_agg(ROW(e.ev_id, NULL, e.ev_type, e.ev_data, coalesce(e.ev_retry, 0), e.ev_time,
                         e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4)::pgque.message ORDER BY e.ev_id)
      INTO v_rows
      FROM pgque.batch_event_rows(v_sub, v_sub.sub_batch_pos, v_limit) e
     WHERE i_sent IS NULL OR e.ev_id <= i_sent;
    IF cardinality(v_rows) > i_max_return THEN
        v_rows := v_rows[1:i_max_return];
        v_sent := v_rows[i_max_return].msg_id;
    END IF;
    PERFORM pgque.delivery_state(v_sub.sub_id, i_batch_id, clock_timestamp(), i_end_tick, v_sent);
    RETURN QUERY
        SELECT m.msg_id, i_batch_id, m.type, m.payload, m.retry_count, m.created_at,
               m.extra1, m.extra2, m.extra3, m.extra4
          FROM unnest(v_rows) m;
END;
$$;
