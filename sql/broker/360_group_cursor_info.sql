-- pgque.group_cursor_info(i_queue_name): one row per (queue, consumer group)
-- - of one queue, or all queues when i_queue_name is NULL: subscription
-- mode, partitions with a cursor, live leases, dead letters, the oldest range
-- start (oldest_xmin) and the partition holding it, and whether that cursor
-- pins the queue's event-table rotation (pins_rotation: its xmin is at or
-- below the last switch, so the next switch waits for it).
-- VOLATILE: its statement takes its snapshot after locking the
-- group_cursor children, so a rotation it waited behind committed before
-- it (STABLE, it read with the caller's older snapshot and missed every
-- moved cursor: 0 partitions, 0 leases; docs/design/broker.md "Rotation").
-- Returns: table. Locks: ACCESS SHARE on the group_cursor children.
-- Called by: operators, status, the broker (consumer-groups routes).
CREATE OR REPLACE FUNCTION pgque.group_cursor_info(i_queue_name text DEFAULT NULL)
RETURNS TABLE (queue_name text, group_name text, subscription_mode text, partitions bigint, leased bigint,
               dead_letters bigint, oldest_xmin xid8, oldest_partition text, pins_rotation boolean,
               last_active timestamptz)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT q.queue_name, g.grp_name, gs.gs_mode,
           (SELECT count(*) FROM pgque.group_cursor gc WHERE gc.gc_queue = q.queue_id AND gc.gc_group = g.grp_id),
           (SELECT count(*) FROM pgque.group_cursor gc WHERE gc.gc_queue = q.queue_id AND gc.gc_group = g.grp_id
               AND gc.gc_lease IS NOT NULL AND gc.gc_lease_until > now()),
           (SELECT count(*) FROM pgque.group_dead_letter d WHERE d.gdl_queue = q.queue_id AND d.gdl_group = g.grp_id),
           o.xmin, o.part_name,
           coalesce(o.xmin <= q.queue_switch_step2, false),
           (SELECT max(gc.gc_active) FROM pgque.group_cursor gc WHERE gc.gc_queue = q.queue_id AND gc.gc_group = g.grp_id)
      FROM pgque.group_subscription gs
      JOIN pgque.queue q ON q.queue_id = gs.gs_queue
      JOIN pgque.broker_group g ON g.grp_id = gs.gs_group
      LEFT JOIN LATERAL (
            SELECT pg_snapshot_xmin(gc.gc_lo) AS xmin, p.part_name
              FROM pgque.group_cursor gc
              JOIN pgque.partition p ON p.part_queue = gc.gc_queue AND p.part_id = gc.gc_partition
             WHERE gc.gc_queue = q.queue_id AND gc.gc_group = g.grp_id
             ORDER BY pg_snapshot_xmin(gc.gc_lo) LIMIT 1) o ON true
     WHERE i_queue_name IS NULL OR q.queue_name = i_queue_name
     ORDER BY q.queue_name, g.grp_name;
$$;
