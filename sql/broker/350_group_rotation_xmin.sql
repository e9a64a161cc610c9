-- pgque.group_rotation_xmin(i_queue_id): the oldest transaction any consumer
-- group of the queue may still need events of: the least xmin of the group
-- cursors' range starts, and of the subscription snapshot of each group that
-- has not yet reached every partition (a later first contact seeds from
-- it). NULL when the queue has no groups. maint_rotate_tables_step1 keeps
-- the old event table while this is at or below the previous switch.
-- (ORDER BY ... LIMIT 1, not min(): min(xid8) only exists from PostgreSQL 15.)
-- VOLATILE: its statement takes its snapshot after locking the
-- group_cursor children, so a cursor rotation it waited behind committed
-- before it. STABLE, it read with the caller's older snapshot: every
-- moved cursor missed, the result fell back to the subscriptions' xmin,
-- which group_set_subscription may have moved past a cursor - and
-- maint_rotate_tables_step1 then truncated an event table that cursor
-- still reads (docs/design/broker.md "Rotation").
-- Returns: xid8. Locks: ACCESS SHARE on the group_cursor children.
-- Called by: group_rotation_pin.
CREATE OR REPLACE FUNCTION pgque.group_rotation_xmin(i_queue_id int)
RETURNS xid8
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT least(
        (SELECT pg_snapshot_xmin(gc.gc_lo) FROM pgque.group_cursor gc WHERE gc.gc_queue = i_queue_id
          ORDER BY 1 LIMIT 1),
        (SELECT pg_snapshot_xmin(gs.gs_lo) FROM pgque.group_subscription gs
          WHERE gs.gs_queue = i_queue_id
            AND EXISTS (SELECT 1 FROM pgque.partition p
                         WHERE p.part_queue = i_queue_id
                           AND NOT EXISTS (SELECT 1 FROM pgque.group_cursor gc
                                            WHERE gc.gc_queue = i_queue_id AND gc.gc_group = gs.gs_group
                                              AND gc.gc_partition = p.part_id))
          ORDER BY 1 LIMIT 1));
$$;
