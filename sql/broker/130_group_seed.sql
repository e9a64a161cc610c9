-- pgque.group_seed(i_queue_id, i_group_id, i_partitions): make sure the
-- group has a cursor for each listed partition of the queue, seeding a
-- missing one from the group's subscription (its range starts after gs_lo,
-- skipping events older than gs_from). Ids that are no partition of the
-- queue are ignored. Returns: cursors created.
-- Locks: advisory (pgque.lock_id_group_seed_class(), hash of queue and group), only when a cursor
-- is missing (serializes creation, so no duplicate rows).
-- Writes: group_cursor (insert). Called by: pop_list (its generated
-- pgque.pop_list_q<queue>_t<table>, when a candidate lacks its cursor),
-- group_advance_idle.
CREATE OR REPLACE FUNCTION pgque.group_seed(i_queue_id int, i_group_id int, i_partitions int[])
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_n int;
BEGIN
    -- (OFFSET 0: one (queue, group, partition) probe per listed partition;
    -- as an anti-join the planner read every cursor of the group, each pop)
    IF NOT EXISTS (SELECT 1 FROM unnest(i_partitions) p
                     JOIN pgque.partition pt ON pt.part_queue = i_queue_id AND pt.part_id = p
                    WHERE NOT EXISTS (SELECT 1 FROM pgque.group_cursor gc
                                       WHERE gc.gc_queue = i_queue_id AND gc.gc_group = i_group_id AND gc.gc_partition = p
                                      OFFSET 0)) THEN
        RETURN 0;
    END IF;
    PERFORM pg_advisory_xact_lock(pgque.lock_id_group_seed_class(), hashtext(i_queue_id || '/' || i_group_id));
    INSERT INTO pgque.group_cursor (gc_gen, gc_queue, gc_group, gc_partition, gc_lo, gc_hi, gc_from)
    SELECT pgque.group_cursor_gen(), i_queue_id, i_group_id, pt.part_id, gs.gs_lo, gs.gs_lo, gs.gs_from
      FROM pgque.group_subscription gs
      JOIN pgque.partition pt ON pt.part_queue = i_queue_id AND pt.part_id = ANY (i_partitions)
     WHERE gs.gs_queue = i_queue_id AND gs.gs_group = i_group_id
       AND NOT EXISTS (SELECT 1 FROM pgque.group_cursor gc
                        WHERE gc.gc_queue = i_queue_id AND gc.gc_group = i_group_id AND gc.gc_partition = pt.part_id);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
