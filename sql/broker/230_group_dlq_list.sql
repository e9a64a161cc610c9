-- pgque.group_dlq_list(i_queue, i_group, i_limit, i_offset, i_tenant): dead
-- letters of consumer groups, newest first, filtered by queue and / or
-- group (NULL: any) and by broker tenant (queue_in_tenant; NULL: every
-- queue), one page (i_limit default 100, 1..10000; i_offset >= 0), with
-- the total count of the filter (so of that tenant's only). Returns: (id, message_id, transaction_id,
-- partition_uuid, queue_name, partition_name, group_name, error,
-- retry_count, data, created_at, failed_at, total).
-- Locks: none. Called by: the broker (GET /api/v1/dlq).
DO $drop$
BEGIN
    -- Earlier installs had no i_tenant: a new argument list is a new function, so
    -- the old one goes (re-running the install keeps this one).
    IF to_regprocedure('pgque.group_dlq_list(text, text, int, int)') IS NOT NULL THEN
        DROP FUNCTION pgque.group_dlq_list(text, text, int, int);
    END IF;
END;
$drop$;
CREATE OR REPLACE FUNCTION pgque.group_dlq_list(i_queue text DEFAULT NULL, i_group text DEFAULT NULL,
                                                i_limit int DEFAULT 100, i_offset int DEFAULT 0,
                                                i_tenant text DEFAULT NULL)
RETURNS TABLE (id bigint, message_id uuid, transaction_id text, partition_uuid uuid, queue_name text,
               partition_name text, group_name text, error text, retry_count int, data text,
               created_at timestamptz, failed_at timestamptz, total bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    IF coalesce(i_limit, 100) NOT BETWEEN 1 AND 10000 OR coalesce(i_offset, 0) < 0 THEN
        RAISE EXCEPTION 'pgque: DLQ page: limit 1..10000, offset >= 0 (got %, %)', i_limit, i_offset
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT d.gdl_id, d.gdl_msg, d.gdl_txn, p.part_uuid, q.queue_name, p.part_name, g.grp_name, d.gdl_error,
           d.gdl_retries, d.gdl_data, d.gdl_created, d.gdl_failed_at, count(*) OVER ()
      FROM pgque.group_dead_letter d
      JOIN pgque.queue q ON q.queue_id = d.gdl_queue
      JOIN pgque.broker_group g ON g.grp_id = d.gdl_group
      LEFT JOIN pgque.partition p ON p.part_queue = d.gdl_queue AND p.part_id = d.gdl_partition
     WHERE (i_queue IS NULL OR q.queue_name = i_queue) AND (i_group IS NULL OR g.grp_name = i_group)
       AND pgque.queue_in_tenant(q.queue_name, i_tenant)
     ORDER BY d.gdl_id DESC
     LIMIT coalesce(i_limit, 100) OFFSET coalesce(i_offset, 0);
END;
$$;
