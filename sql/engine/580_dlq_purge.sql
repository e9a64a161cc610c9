-- pgque.dlq_purge(i_queue_name, i_older_than): delete a queue's dead letters
-- older than i_older_than (default 30 days; '0' purges all).
-- Returns: rows deleted. Locks: the deleted rows. Writes: dead_letter. Called by: operators, maint.
CREATE OR REPLACE FUNCTION pgque.dlq_purge(i_queue_name text, i_older_than interval DEFAULT '30 days')
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_n int;
BEGIN
    DELETE FROM pgque.dead_letter
     WHERE dl_queue_id = (pgque.find_queue(i_queue_name)).queue_id
       AND dl_time <= now() - coalesce(i_older_than, interval '30 days');
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
