-- pgque.delivery_sub(i_batch_id): the subscription row of the receive()
-- delivery i_batch_id, with the delivery laid over it as the row used to
-- hold it (sub_batch = the id, sub_next_tick = its end tick,
-- sub_batch_sent = its last event or NULL, sub_batch_recv = true,
-- sub_active = its lease start); NULL when i_batch_id is not a delivery id
-- or not the subscription's current delivery (acknowledged, superseded
-- after its lease ended, unknown).
-- Delivery ids (receive) are 2^62 + sub_id * 2^31 + (a batch_id_seq value
-- mod 2^31), so the id names its subscription and receive writes no row;
-- batch ids of next_batch() are plain batch_id_seq values, below 2^62.
-- VOLATILE on purpose: each read takes a fresh snapshot after any lock
-- wait, so a row that rotate_metadata moved to another child while the
-- caller waited is found (a STABLE function reads with the caller's older
-- snapshot and would miss it).
-- Locks: none (the callers that change anything hold the batch lock).
-- Called by: lock_batch, get_batch_events, get_batch_info.
CREATE OR REPLACE FUNCTION pgque.delivery_sub(i_batch_id bigint)
RETURNS pgque.subscription
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub pgque.subscription;
    v_del record;
BEGIN
    IF i_batch_id IS NULL OR i_batch_id < 4611686018427387904 THEN
        RETURN NULL;
    END IF;
    SELECT s.* INTO v_sub FROM pgque.subscription s
     WHERE s.sub_id = ((i_batch_id - 4611686018427387904) >> 31)::int;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_del FROM pgque.delivery_state(v_sub.sub_id);
    IF v_del.batch_id IS DISTINCT FROM i_batch_id THEN
        RETURN NULL;
    END IF;
    v_sub.sub_batch := i_batch_id;
    v_sub.sub_next_tick := v_del.end_tick;
    v_sub.sub_batch_sent := v_del.sent;
    v_sub.sub_batch_recv := true;
    v_sub.sub_active := v_del.leased_at;
    RETURN v_sub;
END;
$$;
