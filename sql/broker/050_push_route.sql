-- pgque.push_route(i_queue, i_partitions): what the broker caches to push
-- into queue i_queue without pgque.push: the queue id, its current event
-- table, and for each name of i_partitions (NULL: "Default") the
-- partition's id, NULL when the partition does not exist yet (it is made
-- by pgque.push). No row when the queue does not exist. With these the
-- broker calls pgque.push_direct_q<queue_id>_t<cur_table> (group_plans),
-- which inserts nothing once they are stale: the broker then pushes
-- through pgque.push and asks again.
-- Returns: (queue_id, cur_table, part_ids int[], in i_partitions' order).
-- Locks: none. Reads: queue, partition.
-- Called by: the broker (its push combiner, after a push through pgque.push).
CREATE OR REPLACE FUNCTION pgque.push_route(i_queue text, i_partitions text[])
RETURNS TABLE (queue_id int, cur_table int, part_ids int[])
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT q.queue_id, q.queue_cur_table,
           ARRAY(SELECT p.part_id
                   FROM unnest(i_partitions) WITH ORDINALITY u(pn, o)
                   LEFT JOIN pgque.partition p ON p.part_queue = q.queue_id AND p.part_name = coalesce(u.pn, 'Default')
                  ORDER BY u.o)
      FROM pgque.queue q
     WHERE q.queue_name = i_queue;
$$;
