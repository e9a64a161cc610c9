-- pgque.unregister_consumer(x_queue_name, x_consumer_name): remove a
-- consumer's subscription, its pending retries and its open batch.
-- Returns: 1 removed, 0 was not subscribed. Locks: the queue's tick lock.
-- Writes: subscription, retry_queue; drops the delivery sequences.
-- Called by: unsubscribe(), admins.
CREATE OR REPLACE FUNCTION pgque.unregister_consumer(x_queue_name text, x_consumer_name text)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue  pgque.queue := pgque.find_queue(x_queue_name);
    v_sub_id int;
BEGIN
    PERFORM pg_advisory_xact_lock(pgque.lock_id_queue_tick_class(), v_queue.queue_id);
    DELETE FROM pgque.subscription s
     USING pgque.consumer c
     WHERE s.sub_queue = v_queue.queue_id AND s.sub_consumer = c.co_id AND c.co_name = x_consumer_name
    RETURNING s.sub_id INTO v_sub_id;
    IF v_sub_id IS NULL THEN
        RETURN 0;
    END IF;
    DELETE FROM pgque.retry_queue WHERE ev_owner = v_sub_id;
    PERFORM pgque.delivery_seqs(v_sub_id, false);
    RETURN 1;
END;
$$;
