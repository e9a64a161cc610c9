-- pgque.group_pending(i_queue_id, i_group_id, i_after, i_limit,
-- i_include_leased): the partitions of a queue, by id after i_after (NULL:
-- from the start), at most i_limit (NULL: all), that probably have work for
-- the group: an event after the cursor's position (its open range, or the
-- range up to the latest tick); a partition the group has no cursor for is
-- judged from the group's subscription (none yet: from the oldest event).
-- Partitions under a live lease are left out unless i_include_leased.
-- The cost grows with the number of partitions (one probe each): this is
-- the SQL candidate scan the hot-list avoids.
-- Returns: (partition_id, lease_until (live leases only), last_active).
-- Locks: none. Called by: pop_any (wildcard pop), group_reseed.
CREATE OR REPLACE FUNCTION pgque.group_pending(i_queue_id int, i_group_id int, i_after int, i_limit int,
                                               i_include_leased boolean)
RETURNS TABLE (partition_id int, lease_until timestamptz, last_active timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue  pgque.queue;
    v_snap   pg_snapshot;
    v_tables int[];
BEGIN
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT t.tick_snapshot INTO v_snap FROM pgque.tick t WHERE t.tick_queue = i_queue_id ORDER BY t.tick_id DESC LIMIT 1;
    v_tables := ARRAY[v_queue.queue_cur_table, (v_queue.queue_cur_table + v_queue.queue_ntables - 1) % v_queue.queue_ntables];
    RETURN QUERY EXECUTE format($sql$
        SELECT p.part_id,
               CASE WHEN gc.gc_lease IS NOT NULL AND gc.gc_lease_until > now() THEN gc.gc_lease_until END,
               gc.gc_active
          FROM pgque.partition p
          LEFT JOIN pgque.group_cursor gc ON gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = p.part_id
          LEFT JOIN pgque.group_subscription gs ON gs.gs_queue = $1 AND gs.gs_group = $2
         CROSS JOIN LATERAL (
               SELECT p.part_id AS gc_partition,
                      coalesce(gc.gc_lo, gs.gs_lo, '1:1:'::pg_snapshot) AS gc_lo,
                      coalesce(gc.gc_hi, gs.gs_lo, '1:1:'::pg_snapshot) AS gc_hi,
                      gc.gc_pos_txid, gc.gc_pos,
                      CASE WHEN gc.gc_partition IS NULL THEN gs.gs_from ELSE gc.gc_from END AS gc_from) l
         WHERE p.part_queue = $1 AND ($3::int IS NULL OR p.part_id > $3)
           AND CASE WHEN gc.gc_lease IS NOT NULL AND gc.gc_lease_until > now() THEN $5
                    ELSE EXISTS (%s) OR EXISTS (%s) END
         ORDER BY p.part_id
         LIMIT $4
        $sql$,
        pgque.group_range_sql(i_queue_id, v_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos', NULL, '1', '-$2', 'l.gc_from'),
        pgque.group_range_sql(i_queue_id, v_tables, 'l.gc_hi', '$6', NULL, NULL, NULL, '1', '-$2', 'l.gc_from'))
    USING i_queue_id, i_group_id, i_after, i_limit, coalesce(i_include_leased, false), v_snap;
END;
$$;
