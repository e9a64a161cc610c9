-- pgque.group_dlq_purge(i_queue, i_group): delete the dead letters of a
-- queue (and one group, or all groups when i_group is NULL). An unknown
-- queue raises undefined_object. Returns: rows deleted.
-- Locks: the deleted rows. Writes: group_dead_letter.
-- Called by: the broker (DELETE /api/v1/dlq).
CREATE OR REPLACE FUNCTION pgque.group_dlq_purge(i_queue text, i_group text DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue := pgque.find_queue(i_queue);
    v_n     int;
BEGIN
    DELETE FROM pgque.group_dead_letter d
     WHERE d.gdl_queue = v_queue.queue_id
       AND (i_group IS NULL OR d.gdl_group = (SELECT g.grp_id FROM pgque.broker_group g WHERE g.grp_name = i_group));
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
