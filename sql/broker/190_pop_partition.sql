-- pgque.pop_partition(i_queue, i_partition, i_group, i_batch,
-- i_max_partitions, i_lease_seconds, i_auto_ack, i_mode, i_from): a pop of
-- one partition by name: pop_list over that partition (an unknown
-- partition name yields no rows; the group is still subscribed on first
-- contact). Parameters and result: as pop_list.
-- Locks/writes: as pop_list. Called by: the broker
-- (GET /api/v1/pop/queue/:queue/partition/:partition).
CREATE OR REPLACE FUNCTION pgque.pop_partition(i_queue text, i_partition text, i_group text, i_batch int,
                                               i_max_partitions int DEFAULT 1, i_lease_seconds int DEFAULT NULL,
                                               i_auto_ack boolean DEFAULT false, i_mode text DEFAULT NULL,
                                               i_from timestamptz DEFAULT NULL)
RETURNS TABLE (partition_id int, partition_uuid uuid, partition_name text, verdict text, drained boolean,
               until timestamptz, lease_id uuid, message_id uuid, transaction_id text, payload text,
               created_at timestamptz, delivery_attempt int, ev_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    -- (an unknown queue: pop_list raises, as find_queue would)
    RETURN QUERY SELECT * FROM pgque.pop_list(i_queue, i_group,
        ARRAY(SELECT p.part_id FROM pgque.queue q
                JOIN pgque.partition p ON p.part_queue = q.queue_id AND p.part_name = i_partition
               WHERE q.queue_name = i_queue),
        i_batch, i_max_partitions, i_lease_seconds, i_auto_ack, i_mode, i_from);
END;
$$;
