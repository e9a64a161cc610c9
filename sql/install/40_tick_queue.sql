-- pgque.tick_queue(i_queue_id, i_last_tick_id): make one tick for a queue,
-- unless another session holds the queue's tick lock (then skip: NULL) or a
-- tick newer than i_last_tick_id appeared meanwhile (another ticker won).
-- Records pg_current_snapshot() and the event sequence's position, clears a
-- forced tick, and NOTIFYs pgque_<queue> when the tick carries events and
-- the notify queue is not backed up (a stalled listener must not fill it).
-- Returns: the new tick id or NULL. Locks: advisory (1885827446, queue_id),
-- non-blocking. Writes: tick (insert), queue (only to clear a forced tick).
-- Called by: ticker(), ticker(queue).
CREATE OR REPLACE FUNCTION pgque.tick_queue(i_queue_id int, i_last_tick_id bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue   pgque.queue;
    v_last    record;
    v_seq     bigint;
    v_tick_id bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1885827446, i_queue_id) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT t.tick_id, t.tick_event_seq INTO v_last
      FROM pgque.tick t WHERE t.tick_queue = i_queue_id
     ORDER BY t.tick_id DESC LIMIT 1;
    IF v_last.tick_id IS DISTINCT FROM i_last_tick_id THEN
        RETURN NULL;
    END IF;
    v_seq := coalesce(pg_sequence_last_value(v_queue.queue_event_seq), 0);
    INSERT INTO pgque.tick (tick_gen, tick_queue, tick_id, tick_snapshot, tick_event_seq, tick_new_ids)
    VALUES (pgque.tick_gen(now()), i_queue_id, nextval(v_queue.queue_tick_seq), pgque.tick_snapshot(), v_seq,
            greatest(v_seq - coalesce(v_last.tick_event_seq, 0), 0))
    RETURNING tick_id INTO v_tick_id;
    IF v_queue.queue_force_tick THEN
        UPDATE pgque.queue SET queue_force_tick = false WHERE queue_id = i_queue_id;
    END IF;
    IF v_seq > coalesce(v_last.tick_event_seq, 0)
       AND pg_notification_queue_usage() <= coalesce(pgque.get_setting('notify_max_queue_usage')::float8, 0.001)
    THEN
        PERFORM pg_notify('pgque_' || v_queue.queue_name, v_tick_id::text);
    END IF;
    RETURN v_tick_id;
END;
$$;
