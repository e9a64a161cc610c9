-- pgque.receive(i_queue, i_consumer, i_max_return): open (or re-open) the
-- consumer's batch and return up to i_max_return of its events that are not
-- yet acknowledged, as pgque.message rows. A new batch spans as many ticks as
-- fit i_max_return; a batch with no events for this consumer is finished at
-- once and the next one tried. When more events remain than were returned,
-- the batch stays open: ack() then moves a position inside it, and the next
-- receive() returns the rest with the same batch id (no silent skip).
-- Returns: setof pgque.message. Locks: the subscription row.
-- Writes: subscription. Called by: consumers (pgque_reader).
CREATE OR REPLACE FUNCTION pgque.receive(i_queue text, i_consumer text, i_max_return int DEFAULT 100)
RETURNS SETOF pgque.message
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pgque, pg_catalog
AS $$
DECLARE
    v_sub   pgque.subscription := pgque.find_subscription(i_queue, i_consumer);
    v_batch bigint;
    v_rows  pgque.message[];
    v_last  bigint;
    v_more  boolean;
    v_try   int := 0;
BEGIN
    IF i_max_return IS NULL OR i_max_return < 1 THEN
        RAISE EXCEPTION 'pgque: i_max_return must be at least 1 (got %)', coalesce(i_max_return::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    LOOP
        v_try := v_try + 1;
        v_batch := pgque.open_batch(v_sub, i_max_return);
        IF v_batch IS NULL THEN
            RETURN;
        END IF;
        SELECT s.* INTO v_sub FROM pgque.subscription s WHERE s.sub_id = v_sub.sub_id;
        SELECT array_agg(ROW(e.ev_id, v_batch, e.ev_type, e.ev_data, coalesce(e.ev_retry, 0), e.ev_time,
                             e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4)::pgque.message ORDER BY e.ev_id)
          INTO v_rows
          FROM pgque.batch_event_rows(v_sub, v_sub.sub_batch_pos, i_max_return + 1) e;
        IF v_rows IS NOT NULL THEN
            EXIT;
        END IF;
        -- Nothing (left) for this consumer in the batch: finish it, try the next.
        PERFORM pgque.finish_batch(v_batch);
        IF v_try >= 10 THEN
            RETURN;
        END IF;
        SELECT s.* INTO v_sub FROM pgque.subscription s WHERE s.sub_id = v_sub.sub_id;
    END LOOP;
    v_more := cardinality(v_rows) > i_max_return;
    IF v_more THEN
        v_rows := v_rows[1:i_max_return];
        v_last := v_rows[i_max_return].msg_id;
    END IF;
    UPDATE pgque.subscription
       SET sub_batch_sent = v_last, sub_batch_recv = true, sub_active = now()
     WHERE sub_id = v_sub.sub_id;
    RETURN QUERY SELECT * FROM unnest(v_rows);
END;
$$;
