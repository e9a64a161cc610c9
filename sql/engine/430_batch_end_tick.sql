-- pgque.batch_end_tick(i_sub, i_max_events): where a new batch of this
-- subscription would end. With i_max_events NULL: the next tick after the
-- cursor (PgQ's one tick per batch). Otherwise as many following ticks as fit
-- i_max_events by their event-id deltas (at least one), so a consumer that
-- polls slower than the tick rate needs one batch, not many.
-- Returns: the end tick id, NULL when there is no newer tick.
-- Locks: none (reads ticks). Called by: open_batch, receive.
CREATE OR REPLACE FUNCTION pgque.batch_end_tick(i_sub pgque.subscription, i_max_events int)
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_next bigint;
BEGIN
    IF i_max_events IS NULL THEN
        SELECT t.tick_id INTO v_next FROM pgque.tick t
         WHERE t.tick_queue = i_sub.sub_queue AND t.tick_id > i_sub.sub_last_tick
         ORDER BY t.tick_id LIMIT 1;
        RETURN v_next;
    END IF;
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
    RETURN v_next;
END;
$$;
