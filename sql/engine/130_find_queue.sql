-- pgque.find_queue(i_queue_name[, i_errcode]): the queue row, or an error
-- that names the queue when it does not exist, with SQLSTATE i_errcode:
-- raise_exception (P0001) from the PgQue-compatible API (PgQue raises its
-- errors with plain RAISE EXCEPTION, and its clients catch them as
-- raise_exception), undefined_object (42704, the one-argument form) from
-- the rest (the broker answers it with 404).
-- Locks: none. Reads: queue. Called by: most API functions.
CREATE OR REPLACE FUNCTION pgque.find_queue(i_queue_name text, i_errcode text)
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
            USING ERRCODE = i_errcode, HINT = 'Create it with pgque.create_queue(name).';
    END IF;
    RETURN v_queue;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.find_queue(i_queue_name text)
RETURNS pgque.queue
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN pgque.find_queue(i_queue_name, 'undefined_object');
END;
$$;
