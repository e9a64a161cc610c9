-- pgque.find_queue(i_queue_name): the queue row, or an error that names the
-- queue when it does not exist. Locks: none. Reads: queue.
-- Called by: most API functions.
CREATE OR REPLACE FUNCTION pgque.find_queue(i_queue_name text)
RETURNS pgque.queue
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
BEGIN
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_name = i_queue_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgque: queue "%" does not exist', i_queue_name
            USING ERRCODE = 'undefined_object', HINT = 'Create it with pgque.create_queue(name).';
    END IF;
    RETURN v_queue;
END;
$$;
