-- pgque.dlq_inspect(i_queue_name, i_limit_count): the newest dead letters of
-- a queue. Returns: rows (dl_id, consumer_name, dl_time, dl_reason, ev_id,
-- ev_time, ev_retry, ev_type, ev_data, ev_extra1..4). Locks: none.
-- Called by: operators, the broker's DLQ endpoint.
CREATE OR REPLACE FUNCTION pgque.dlq_inspect(i_queue_name text, i_limit_count int DEFAULT 100)
RETURNS TABLE (dl_id bigint, consumer_name text, dl_time timestamptz, dl_reason text, ev_id bigint,
               ev_time timestamptz, ev_retry int, ev_type text, ev_data text,
               ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT d.dl_id, c.co_name, d.dl_time, d.dl_reason, d.ev_id, d.ev_time, d.ev_retry, d.ev_type, d.ev_data,
           d.ev_extra1, d.ev_extra2, d.ev_extra3, d.ev_extra4
      FROM pgque.dead_letter d
      JOIN pgque.consumer c ON c.co_id = d.dl_consumer_id
     WHERE d.dl_queue_id = (pgque.find_queue(i_queue_name)).queue_id
     ORDER BY d.dl_id DESC
     LIMIT greatest(coalesce(i_limit_count, 100), 0);
$$;
