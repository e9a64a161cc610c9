-- pgque.lock_batch(i_batch_id): the subscription row whose open batch is
-- i_batch_id, read after taking that subscription's batch lock (advisory
-- (pgque.lock_id_subscription_batch_class(), sub_id), as find_subscription). A receive() delivery id
-- (delivery_sub) comes back as the row with the delivery laid over it; a
-- next_batch() id is the row's sub_batch, and counts only while no
-- receive() delivery is out (one that is supersedes it). NULL when no
-- subscription has that batch open (unknown, finished, superseded).
-- Locks: the batch lock. Called by: ack, finish_batch, nack, event_retry.
CREATE OR REPLACE FUNCTION pgque.lock_batch(i_batch_id bigint)
RETURNS pgque.subscription
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub pgque.subscription;
BEGIN
    IF i_batch_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF i_batch_id >= 4611686018427387904 THEN
        PERFORM pg_advisory_xact_lock(pgque.lock_id_subscription_batch_class(), ((i_batch_id - 4611686018427387904) >> 31)::int);
        RETURN pgque.delivery_sub(i_batch_id);
    END IF;
    SELECT s.* INTO v_sub FROM pgque.subscription s WHERE s.sub_batch = i_batch_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(pgque.lock_id_subscription_batch_class(), v_sub.sub_id);
    SELECT s.* INTO v_sub FROM pgque.subscription s WHERE s.sub_id = v_sub.sub_id AND s.sub_batch = i_batch_id;
    IF NOT FOUND OR (SELECT d.batch_id FROM pgque.delivery_state(v_sub.sub_id) d) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    RETURN v_sub;
END;
$$;
