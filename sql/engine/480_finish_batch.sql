-- pgque.finish_batch(x_batch_id): close a batch: the consumer's cursor moves
-- to the batch's end tick. Returns: 1 finished, 0 unknown or already
-- finished. Locks: the subscription's batch lock (and gives back the
-- reader lock of a receive() delivery, see delivery_release). Writes:
-- subscription (and the delivery sequences for a receive() delivery id).
-- Called by: ack(), PgQ-style consumers.
CREATE OR REPLACE FUNCTION pgque.finish_batch(x_batch_id bigint)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub pgque.subscription := pgque.lock_batch(x_batch_id);
BEGIN
    IF v_sub.sub_id IS NULL THEN
        RETURN 0;
    END IF;
    IF x_batch_id >= 4611686018427387904 THEN
        -- A receive() delivery: its batch ends where the delivery says.
        UPDATE pgque.subscription
           SET sub_last_tick = v_sub.sub_next_tick, sub_batch = NULL, sub_next_tick = NULL,
               sub_batch_pos = NULL, sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
         WHERE sub_id = v_sub.sub_id;
        PERFORM pgque.delivery_state(v_sub.sub_id, NULL, NULL, NULL, NULL);
        PERFORM pgque.delivery_release(v_sub.sub_id);
        RETURN 1;
    END IF;
    UPDATE pgque.subscription
       SET sub_last_tick = sub_next_tick, sub_batch = NULL, sub_next_tick = NULL,
           sub_batch_pos = NULL, sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
     WHERE sub_id = v_sub.sub_id AND sub_batch = x_batch_id;
    RETURN CASE WHEN FOUND THEN 1 ELSE 0 END;
END;
$$;
