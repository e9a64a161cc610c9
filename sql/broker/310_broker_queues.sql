-- pgque.broker_queues(i_queue_name): the queues as the broker's resources
-- routes show them - one queue (i_queue_name), or all when it is NULL, in
-- name order: id, name, namespace and task labels, creation time, number
-- of interned partitions, and the effective broker options (HTTP names,
-- defaults filled in by broker_options). An unknown name gives no row.
-- Returns: table. Locks: none. Writes: nothing.
-- Called by: the broker (GET /api/v1/resources/queues[/:queue],
-- GET /api/v1/status).
CREATE OR REPLACE FUNCTION pgque.broker_queues(i_queue_name text DEFAULT NULL)
RETURNS TABLE (queue_id int, queue_name text, namespace text, task text, created_at timestamptz,
               partitions bigint, options jsonb)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT qu.queue_id, qu.queue_name, qu.queue_options ->> 'namespace', qu.queue_options ->> 'task',
           qu.queue_created,
           (SELECT count(*) FROM pgque.partition p WHERE p.part_queue = qu.queue_id),
           pgque.broker_options(qu.queue_options)
      FROM pgque.queue qu
     WHERE i_queue_name IS NULL OR qu.queue_name = i_queue_name
     ORDER BY qu.queue_name;
$$;
