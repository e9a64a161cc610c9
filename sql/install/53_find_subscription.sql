-- pgque.find_subscription(i_queue_name, i_consumer_name): the consumer's
-- subscription row, locked FOR UPDATE (one batch operation per consumer at a
-- time); an unknown queue or consumer raises a clear error.
-- Locks: the subscription row. Called by: receive, next_batch.
CREATE OR REPLACE FUNCTION pgque.find_subscription(i_queue_name text, i_consumer_name text)
RETURNS pgque.subscription
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pgque, pg_catalog
AS $$
DECLARE
    v_queue pgque.queue := pgque.find_queue(i_queue_name);
    v_sub   pgque.subscription;
BEGIN
    SELECT s.* INTO v_sub
      FROM pgque.subscription s
      JOIN pgque.consumer c ON c.co_id = s.sub_consumer
     WHERE s.sub_queue = v_queue.queue_id AND c.co_name = i_consumer_name
       FOR UPDATE OF s;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgque: consumer "%" is not subscribed to queue "%"', i_consumer_name, i_queue_name
            USING ERRCODE = 'undefined_object', HINT = 'Subscribe it first: SELECT pgque.subscribe(queue, consumer).';
    END IF;
    RETURN v_sub;
END;
$$;
