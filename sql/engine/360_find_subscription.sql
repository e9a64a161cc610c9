-- pgque.find_subscription(i_queue_name, i_consumer_name): the consumer's
-- subscription row, read after taking the subscription's batch lock (one
-- batch operation per consumer at a time); an unknown queue or consumer
-- raises a clear error (P0001, as PgQue's next_batch). The lock is advisory (pgque.lock_id_subscription_batch_class(), sub_id), not a row
-- lock: it writes no WAL and survives the row moving to another child.
-- Locks: the subscription's batch lock (transaction). Called by: receive,
-- next_batch, next_batch_info.
CREATE OR REPLACE FUNCTION pgque.find_subscription(i_queue_name text, i_consumer_name text)
RETURNS pgque.subscription
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue := pgque.find_queue(i_queue_name, 'raise_exception');
    v_sub   pgque.subscription;
BEGIN
    SELECT s.* INTO v_sub
      FROM pgque.subscription s
      JOIN pgque.consumer c ON c.co_id = s.sub_consumer
     WHERE s.sub_queue = v_queue.queue_id AND c.co_name = i_consumer_name;
    IF FOUND THEN
        PERFORM pg_advisory_xact_lock(pgque.lock_id_subscription_batch_class(), v_sub.sub_id);
        SELECT s.* INTO v_sub FROM pgque.subscription s WHERE s.sub_id = v_sub.sub_id;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgque: consumer "%" is not subscribed to queue "%"', i_consumer_name, i_queue_name
            USING ERRCODE = 'raise_exception', HINT = 'Subscribe it first: SELECT pgque.subscribe(queue, consumer).';
    END IF;
    RETURN v_sub;
END;
$$;
