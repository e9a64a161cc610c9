-- pgque.force_next_tick(i_queue_name) / pgque.force_tick(i_queue_name): make
-- the next ticker() call tick this queue whatever its thresholds say.
-- An unknown queue raises "no such queue" (PgQue's message; clients match)
-- with SQLSTATE P0001, as PgQue.
-- Returns: the queue's latest tick id. Locks: the queue row. Writes: queue.
-- Called by: tests, admins, consumers that want a batch now.
CREATE OR REPLACE FUNCTION pgque.force_next_tick(i_queue_name text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
BEGIN
    SELECT * INTO v_queue FROM pgque.queue q WHERE q.queue_name = i_queue_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgque: no such queue: "%"', i_queue_name
            USING ERRCODE = 'raise_exception', HINT = 'Create it with pgque.create_queue(name).';
    END IF;
    UPDATE pgque.queue SET queue_force_tick = true
     WHERE queue_id = v_queue.queue_id AND NOT queue_force_tick;
    RETURN (SELECT max(tick_id) FROM pgque.tick WHERE tick_queue = v_queue.queue_id);
END;
$$;

CREATE OR REPLACE FUNCTION pgque.force_tick(i_queue_name text)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT pgque.force_next_tick(i_queue_name);
$$;
