-- pgque.group_advance_idle(i_queue_id): let idle consumer groups stop
-- pinning the queue's event-table rotation. Seeds a cursor for every
-- (subscribed group, partition) pair that has none yet, then moves the
-- subscription snapshot to the latest tick (partitions created later can
-- only hold later events); then every cursor that holds no live lease and
-- has no pending event up to the latest tick gets its range reset to
-- (latest tick, latest tick]. Nothing a group may still read is skipped.
-- Returns: cursors advanced. Locks: the advanced cursor rows (FOR UPDATE
-- SKIP LOCKED: a busy cursor is not idle), as group_seed.
-- Writes: group_cursor, group_subscription. Called by: group_rotation_pin.
CREATE OR REPLACE FUNCTION pgque.group_advance_idle(i_queue_id int)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_tick  bigint;
    v_snap  pg_snapshot;
    v_grp   int;
    v_n     int;
    v_tables int[];
BEGIN
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    SELECT t.tick_id, t.tick_snapshot INTO v_tick, v_snap
      FROM pgque.tick t WHERE t.tick_queue = i_queue_id ORDER BY t.tick_id DESC LIMIT 1;
    FOR v_grp IN SELECT gs.gs_group FROM pgque.group_subscription gs WHERE gs.gs_queue = i_queue_id LOOP
        PERFORM pgque.group_seed(i_queue_id, v_grp, ARRAY(SELECT p.part_id FROM pgque.partition p WHERE p.part_queue = i_queue_id));
        UPDATE pgque.group_subscription SET gs_lo = v_snap
         WHERE gs_queue = i_queue_id AND gs_group = v_grp AND gs_lo::text <> v_snap::text;
    END LOOP;
    v_tables := ARRAY[v_queue.queue_cur_table, (v_queue.queue_cur_table + v_queue.queue_ntables - 1) % v_queue.queue_ntables];
    EXECUTE format($sql$
        WITH idle AS (
            SELECT l.gc_group, l.gc_partition FROM pgque.group_cursor l
             WHERE l.gc_queue = $1 AND (l.gc_lease IS NULL OR l.gc_lease_until <= now())
               AND l.gc_lo::text <> $2::text
               AND NOT EXISTS (%s) AND NOT EXISTS (%s)
               FOR UPDATE SKIP LOCKED
        )
        UPDATE pgque.group_cursor gc
           SET gc_lo = $2, gc_hi = $2, gc_tick = $3, gc_pos_txid = NULL, gc_pos = NULL, gc_lease = NULL,
               gc_lease_until = NULL, gc_end_txid = NULL, gc_lease_end = NULL, gc_attempts = 0, gc_fail_ev = NULL, gc_fails = 0,
               gc_active = now()
          FROM idle i
         WHERE gc.gc_queue = $1 AND gc.gc_group = i.gc_group AND gc.gc_partition = i.gc_partition
        $sql$,
        pgque.group_range_sql(i_queue_id, v_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos', NULL, '1',
                              '-l.gc_group', 'l.gc_from'),
        pgque.group_range_sql(i_queue_id, v_tables, 'l.gc_hi', '$2', NULL, NULL, NULL, '1', '-l.gc_group', 'l.gc_from'))
    USING i_queue_id, v_snap, v_tick;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
