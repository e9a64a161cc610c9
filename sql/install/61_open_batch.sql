-- pgque.open_batch(i_sub, i_max_events): open a batch for a locked
-- subscription that has none. With i_max_events NULL the batch is the next
-- tick (PgQ's next_batch). Otherwise it spans as many following ticks as fit
-- i_max_events by their event-sequence deltas (at least one tick), so a
-- consumer polling slower than the tick rate needs one batch, not many.
-- Returns: the batch id, or NULL when there is no newer tick.
-- Locks: the caller holds the subscription row. Writes: subscription.
-- Called by: next_batch, receive.
CREATE OR REPLACE FUNCTION pgque.open_batch(i_sub pgque.subscription, i_max_events int)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pgque, pg_catalog
AS $$
DECLARE
    v_next  bigint;
    v_batch bigint;
BEGIN
    IF i_sub.sub_batch IS NOT NULL THEN
        RETURN i_sub.sub_batch;
    END IF;
    IF i_max_events IS NULL THEN
        SELECT t.tick_id INTO v_next FROM pgque.tick t
         WHERE t.tick_queue = i_sub.sub_queue AND t.tick_id > i_sub.sub_last_tick
         ORDER BY t.tick_id LIMIT 1;
    ELSE
        SELECT coalesce(max(d.tick_id) FILTER (WHERE d.cum <= i_max_events), min(d.tick_id))
          INTO v_next
          FROM (SELECT w.tick_id,
                       sum(w.tick_event_seq - w.prev_seq) OVER (ORDER BY w.tick_id) AS cum
                  FROM (SELECT t.tick_id, t.tick_event_seq,
                               lag(t.tick_event_seq, 1, (SELECT l.tick_event_seq FROM pgque.tick l
                                                          WHERE l.tick_queue = i_sub.sub_queue
                                                            AND l.tick_id = i_sub.sub_last_tick))
                                   OVER (ORDER BY t.tick_id) AS prev_seq
                          FROM pgque.tick t
                         WHERE t.tick_queue = i_sub.sub_queue AND t.tick_id > i_sub.sub_last_tick
                         ORDER BY t.tick_id
                         LIMIT 1000) w) d;
    END IF;
    IF v_next IS NULL THEN
        RETURN NULL;
    END IF;
    v_batch := nextval('pgque.batch_id_seq');
    UPDATE pgque.subscription
       SET sub_batch = v_batch, sub_next_tick = v_next, sub_batch_pos = NULL,
           sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
     WHERE sub_id = i_sub.sub_id;
    RETURN v_batch;
END;
$$;
