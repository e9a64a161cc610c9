-- pgque.ack_route(i_group, i_partition, i_tenant): what the broker caches
-- to ack messages of partition i_partition (its UUID) for consumer group
-- i_group ('' or NULL: queue mode) without pgque.group_ack: the queue id,
-- the partition's id, the queue's current event table, the queue's name
-- and the group's id. No row when the partition or the group does not
-- exist, or the partition's queue is not in tenant i_tenant
-- (queue_in_tenant; NULL: any queue). With these the broker calls
-- pgque.ack_direct_q<queue_id>_t<cur_table> (group_plans), which changes
-- nothing once they are stale: the broker then acks through
-- pgque.group_ack and asks again.
-- Returns: (queue_id, part_id, cur_table, queue_name, group_id).
-- Locks: none. Reads: partition, queue, broker_group.
-- Called by: the broker (its ack combiner).
CREATE OR REPLACE FUNCTION pgque.ack_route(i_group text, i_partition uuid, i_tenant text)
RETURNS TABLE (queue_id int, part_id int, cur_table int, queue_name text, group_id int)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT p.part_queue, p.part_id, q.queue_cur_table, q.queue_name, g.grp_id
      FROM pgque.partition p
      JOIN pgque.queue q ON q.queue_id = p.part_queue
      JOIN pgque.broker_group g ON g.grp_name = pgque.group_name_or_default(i_group)
     WHERE p.part_uuid = i_partition
       AND (i_tenant IS NULL OR pgque.queue_in_tenant(q.queue_name, i_tenant));
$$;
