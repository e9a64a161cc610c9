-- pgque.pop_any(i_queue, i_group, i_batch, i_max_partitions,
-- i_lease_seconds, i_auto_ack, i_mode, i_from): the wildcard pop with the
-- SQL candidate scan (hot-list off, or a cold start): subscribe the group on
-- first contact, find the partitions with pending work and no live lease
-- (group_pending), least recently served first, at most
-- max(4 x i_max_partitions, 16) of them, and run pop_list over them - one
-- round trip. Parameters and result: as pop_list.
-- Locks/writes: as group_subscribe and pop_list. Called by: the broker
-- (GET /api/v1/pop/queue/:queue without the hot-list).
CREATE OR REPLACE FUNCTION pgque.pop_any(i_queue text, i_group text, i_batch int, i_max_partitions int DEFAULT 1,
                                         i_lease_seconds int DEFAULT NULL, i_auto_ack boolean DEFAULT false,
                                         i_mode text DEFAULT NULL, i_from timestamptz DEFAULT NULL)
RETURNS TABLE (partition_id int, partition_uuid uuid, partition_name text, verdict text, drained boolean,
               until timestamptz, lease_id uuid, message_id uuid, transaction_id text, payload text,
               created_at timestamptz, delivery_attempt int, ev_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue := pgque.find_queue(i_queue);
    v_group int := pgque.group_subscribe(v_queue.queue_id, i_group, i_mode, i_from);
    v_cands int[];
BEGIN
    SELECT array_agg(c.partition_id ORDER BY c.last_active NULLS FIRST, c.partition_id) INTO v_cands
      FROM (SELECT g.partition_id, g.last_active FROM pgque.group_pending(v_queue.queue_id, v_group, NULL, NULL, false) g
             ORDER BY g.last_active NULLS FIRST, g.partition_id
             LIMIT greatest(4 * coalesce(i_max_partitions, 1), 16)) c;
    RETURN QUERY SELECT * FROM pgque.pop_list(i_queue, i_group, coalesce(v_cands, '{}'), i_batch, i_max_partitions,
                                              i_lease_seconds, i_auto_ack, i_mode, i_from);
END;
$$;
