-- pgque.tick_queue(i_queue_id, i_last_tick_id, i_event_seq, i_probe,
-- i_own_inserted, i_xids): make one tick for a queue, unless another session
-- holds the queue's tick lock (then skip: NULL) or a tick newer than
-- i_last_tick_id appeared meanwhile (another ticker won): tick_prepare (the
-- visibility rules, the parameters' meaning and order: 250_tick_prepare.sql)
-- and the INSERT of its row. For callers outside any exception block
-- (ticker(queue), broker_tick); ticker() prepares all due queues first.
-- Must run in READ COMMITTED (tick_prepare raises otherwise).
-- Returns: the new tick id or NULL. Locks: as tick_prepare. Writes: tick
-- (insert), queue (only to clear a forced tick). Called by: ticker(queue),
-- broker_tick.
DROP FUNCTION IF EXISTS pgque.tick_queue(int, bigint);
CREATE OR REPLACE FUNCTION pgque.tick_queue(i_queue_id int, i_last_tick_id bigint, i_event_seq bigint,
                                            i_probe boolean, i_own_inserted boolean, i_xids bigint[])
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_row pgque.tick;
BEGIN
    v_row := pgque.tick_prepare(i_queue_id, i_last_tick_id, i_event_seq, i_probe, i_own_inserted, i_xids);
    IF v_row.tick_id IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO pgque.tick SELECT v_row.*;
    RETURN v_row.tick_id;
END;
$$;
