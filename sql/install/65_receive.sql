-- pgque.receive(i_queue, i_consumer, i_max_return): open (or re-open) the
-- consumer's batch and return up to i_max_return of its events that are not
-- yet acknowledged, as pgque.message rows. A new batch spans as many ticks as
-- fit i_max_return; a batch with nothing for this consumer is finished at
-- once (never stored) and the next one tried. When more events remain than
-- were returned, the batch stays open: ack() then moves a position inside
-- it, and the next receive() returns the rest under the same batch id (no
-- silent skip). One UPDATE of the subscription row per call with events.
-- Returns: setof pgque.message. Locks: the subscription's batch lock.
-- Writes: subscription. Called by: consumers (pgque_reader).
CREATE OR REPLACE FUNCTION pgque.receive(i_queue text, i_consumer text, i_max_return int DEFAULT 100)
RETURNS SETOF pgque.message
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub  pgque.subscription;
    v_next bigint;
    v_rows pgque.message[];
    v_last bigint;
    v_try  int := 0;
BEGIN
    IF i_max_return IS NULL OR i_max_return < 1 THEN
        RAISE EXCEPTION 'pgque: i_max_return must be at least 1 (got %)', coalesce(i_max_return::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_sub := pgque.find_subscription(i_queue, i_consumer);
    LOOP
        v_try := v_try + 1;
        IF v_sub.sub_batch IS NULL THEN
            v_next := pgque.batch_end_tick(v_sub, i_max_return);
            IF v_next IS NULL THEN
                RETURN;
            END IF;
            v_sub.sub_batch := nextval('pgque.batch_id_seq');
            v_sub.sub_next_tick := v_next;
            v_sub.sub_batch_pos := NULL;
        END IF;
        SELECT array_agg(ROW(e.ev_id, v_sub.sub_batch, e.ev_type, e.ev_data, coalesce(e.ev_retry, 0), e.ev_time,
                             e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4)::pgque.message ORDER BY e.ev_id)
          INTO v_rows
          FROM pgque.batch_event_rows(v_sub, v_sub.sub_batch_pos, i_max_return + 1) e;
        EXIT WHEN v_rows IS NOT NULL;
        -- Nothing (left) for this consumer in the batch: finish it, try the next.
        UPDATE pgque.subscription
           SET sub_last_tick = v_sub.sub_next_tick, sub_batch = NULL, sub_next_tick = NULL,
               sub_batch_pos = NULL, sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
         WHERE sub_id = v_sub.sub_id;
        IF v_try >= 10 THEN
            RETURN;
        END IF;
        v_sub.sub_last_tick := v_sub.sub_next_tick;
        v_sub.sub_batch := NULL;
        v_sub.sub_next_tick := NULL;
    END LOOP;
    IF cardinality(v_rows) > i_max_return THEN
        v_rows := v_rows[1:i_max_return];
        v_last := v_rows[i_max_return].msg_id;
    END IF;
    UPDATE pgque.subscription
       SET sub_batch = v_sub.sub_batch, sub_next_tick = v_sub.sub_next_tick, sub_batch_pos = v_sub.sub_batch_pos,
           sub_batch_sent = v_last, sub_batch_recv = true, sub_active = now()
     WHERE sub_id = v_sub.sub_id;
    RETURN QUERY SELECT * FROM unnest(v_rows);
END;
$$;
