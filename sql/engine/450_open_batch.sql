-- pgque.open_batch(i_sub, i_max_events): open a batch for a subscription
-- whose batch lock the caller holds, ending where batch_end_tick says.
-- Returns: the batch id (the open one if there is one, an unacknowledged
-- receive() delivery included), NULL when there is no
-- newer tick. Locks: the caller holds the batch lock. Writes: subscription.
-- Called by: next_batch, next_batch_info.
CREATE OR REPLACE FUNCTION pgque.open_batch(i_sub pgque.subscription, i_max_events int)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_next  bigint;
    v_batch bigint;
BEGIN
    -- A receive() delivery that is out is the open batch.
    v_batch := (SELECT d.batch_id FROM pgque.delivery_state(i_sub.sub_id) d);
    IF v_batch IS NOT NULL THEN
        RETURN v_batch;
    END IF;
    IF i_sub.sub_batch IS NOT NULL THEN
        RETURN i_sub.sub_batch;
    END IF;
    v_next := pgque.batch_end_tick(i_sub, i_max_events);
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
