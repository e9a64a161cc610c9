-- pgque.ack(i_batch_id): acknowledge the delivery receive() returned under
-- i_batch_id. When it held the rest of the batch the batch is finished (the
-- cursor moves to its end tick); otherwise the batch stays open with its
-- position moved past the delivered events, and the next receive() returns
-- the rest. A batch opened by next_batch() and never received is finished
-- whole (PgQ's finish_batch).
-- Idempotent: a repeated ack (a client retrying after a lost reply) finds
-- nothing outstanding and returns 0 without moving anything; an id that is
-- not the consumer's current delivery (finished, superseded after its lease
-- ended, unknown) returns 0.
-- A receive() delivery (recorded in the delivery sequences, see receive) is
-- written to the row here, in its one durable write: the cursor moves to
-- the batch's end tick, or (partial) the batch is stored open with its
-- position; then the delivery is cleared.
-- Returns: 1 acknowledged, 0 nothing to acknowledge.
-- Locks: the subscription's batch lock; gives back the reader lock when
-- this session received the delivery (delivery_release).
-- Writes: subscription (one UPDATE), the delivery sequences.
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
    IF i_batch_id >= 4611686018427387904 THEN
        -- A receive() delivery (delivery_sub laid it over the row).
        IF v_sub.sub_batch_sent IS NOT NULL THEN
            UPDATE pgque.subscription
               SET sub_batch = i_batch_id, sub_next_tick = v_sub.sub_next_tick, sub_batch_pos = v_sub.sub_batch_sent,
                   sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
             WHERE sub_id = v_sub.sub_id;
        ELSE
            UPDATE pgque.subscription
               SET sub_last_tick = v_sub.sub_next_tick, sub_batch = NULL, sub_next_tick = NULL,
                   sub_batch_pos = NULL, sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
             WHERE sub_id = v_sub.sub_id;
        END IF;
        PERFORM pgque.delivery_state(v_sub.sub_id, NULL, NULL, NULL, NULL);
        PERFORM pgque.delivery_release(v_sub.sub_id);
        RETURN 1;
    END IF;
    IF v_sub.sub_batch_recv AND v_sub.sub_batch_sent IS NOT NULL THEN
        -- A partial delivery: move the position past it, keep the batch open.
        UPDATE pgque.subscription
           SET sub_batch_pos = sub_batch_sent, sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
         WHERE sub_id = v_sub.sub_id;
    ELSIF v_sub.sub_batch_recv OR v_sub.sub_batch_pos IS NULL THEN
        -- The rest of the batch was delivered, or next_batch() opened it and
        -- nobody received from it: finish the batch.
        UPDATE pgque.subscription
           SET sub_last_tick = sub_next_tick, sub_batch = NULL, sub_next_tick = NULL,
               sub_batch_pos = NULL, sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
         WHERE sub_id = v_sub.sub_id;
    ELSE
        -- Already acknowledged (a retried ack): nothing is outstanding.
        RETURN 0;
    END IF;
    RETURN 1;
END;
$$;
