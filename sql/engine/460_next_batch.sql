-- pgque.next_batch(i_queue_name, i_consumer_name): PgQ's primitive: the open
-- batch's id, or open one covering the next tick. Returns: batch id, or NULL
-- when there is nothing to do. Locks: the subscription row.
-- Writes: subscription. Called by: PgQ-style consumers.
--
-- pgque.next_batch_info(...): the same, with the batch's tick bounds.
CREATE OR REPLACE FUNCTION pgque.next_batch(i_queue_name text, i_consumer_name text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN pgque.open_batch(pgque.find_subscription(i_queue_name, i_consumer_name), NULL);
END;
$$;

CREATE OR REPLACE FUNCTION pgque.next_batch_info(i_queue_name text, i_consumer_name text,
    OUT batch_id bigint, OUT cur_tick_id bigint, OUT prev_tick_id bigint,
    OUT cur_tick_time timestamptz, OUT prev_tick_time timestamptz,
    OUT cur_tick_event_seq bigint, OUT prev_tick_event_seq bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub pgque.subscription := pgque.find_subscription(i_queue_name, i_consumer_name);
BEGIN
    batch_id := pgque.open_batch(v_sub, NULL);
    IF batch_id IS NULL THEN
        RETURN;
    END IF;
    SELECT s.* INTO v_sub FROM pgque.subscription s WHERE s.sub_id = v_sub.sub_id;
    IF batch_id >= 4611686018427387904 THEN
        v_sub := pgque.delivery_sub(batch_id);  -- a receive() delivery's ticks
    END IF;
    SELECT t.tick_id, t.tick_time, t.tick_event_seq INTO prev_tick_id, prev_tick_time, prev_tick_event_seq
      FROM pgque.tick t WHERE t.tick_queue = v_sub.sub_queue AND t.tick_id = v_sub.sub_last_tick;
    SELECT t.tick_id, t.tick_time, t.tick_event_seq INTO cur_tick_id, cur_tick_time, cur_tick_event_seq
      FROM pgque.tick t WHERE t.tick_queue = v_sub.sub_queue AND t.tick_id = v_sub.sub_next_tick;
END;
$$;
