-- pgque.lock_batch(i_batch_id): the subscription row whose open batch is
-- i_batch_id, read after taking that subscription's batch lock (advisory
-- (1885827447, sub_id), as find_subscription); NULL when no subscription
-- has that batch open (unknown or finished). Locks: the batch lock.
-- Called by: ack, finish_batch, nack, event_retry.
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
    SELECT s.* INTO v_sub FROM pgque.subscription s WHERE s.sub_batch = i_batch_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(1885827447, v_sub.sub_id);
    SELECT s.* INTO v_sub FROM pgque.subscription s WHERE s.sub_id = v_sub.sub_id AND s.sub_batch = i_batch_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN v_sub;
END;
$$;
