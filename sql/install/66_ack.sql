-- pgque.ack(i_batch_id): acknowledge what the last receive() returned from
-- this batch. When that was the rest of the batch the batch is finished (the
-- cursor moves to its end tick); otherwise the batch stays open with its
-- position moved past the returned events. A batch opened by next_batch()
-- and never received is finished whole (PgQ's finish_batch).
-- Returns: 1 acknowledged, 0 unknown or already finished batch.
-- Locks: the subscription's batch lock. Writes: subscription (one UPDATE).
-- Called by: consumers (pgque_reader).
CREATE OR REPLACE FUNCTION pgque.ack(i_batch_id bigint)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub pgque.subscription := pgque.lock_batch(i_batch_id);
BEGIN
    IF v_sub.sub_id IS NULL THEN
        RETURN 0;
    END IF;
    IF v_sub.sub_batch_recv AND v_sub.sub_batch_sent IS NOT NULL THEN
        UPDATE pgque.subscription
           SET sub_batch_pos = sub_batch_sent, sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
         WHERE sub_id = v_sub.sub_id;
    ELSE
        UPDATE pgque.subscription
           SET sub_last_tick = sub_next_tick, sub_batch = NULL, sub_next_tick = NULL,
               sub_batch_pos = NULL, sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
         WHERE sub_id = v_sub.sub_id;
    END IF;
    RETURN 1;
END;
$$;
