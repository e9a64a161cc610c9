-- pgque.broker_delete_queue(i_queue): delete a queue with everything of it,
-- consumer groups included: group cursors and dead letters, then
-- drop_queue(i_queue, true) (classic subscriptions, events, ticks,
-- partitions; group subscriptions cascade). Dedup rows stay until their
-- child is truncated (insert-only; a new queue of the same name has a new
-- id, so they never match it). An unknown queue raises undefined_object.
-- Returns: 1. Locks: as drop_queue. Writes: group_cursor,
-- group_dead_letter, and what drop_queue writes.
-- Called by: the broker (DELETE /api/v1/resources/queues/:queue).
CREATE OR REPLACE FUNCTION pgque.broker_delete_queue(i_queue text)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue := pgque.find_queue(i_queue);
BEGIN
    PERFORM pg_advisory_xact_lock(pgque.lock_id_queue_tick_class(), v_queue.queue_id);
    DELETE FROM pgque.group_cursor WHERE gc_queue = v_queue.queue_id;
    DELETE FROM pgque.group_dead_letter WHERE gdl_queue = v_queue.queue_id;
    RETURN pgque.drop_queue(i_queue, true);
END;
$$;
