-- pgque.queue_depth(i_queue_name, i_group): the depth of a queue by
-- partition, for one consumer group (default __QUEUE_MODE__, the competing
-- consumers): per interned partition (in id order) its name, UUID, the
-- events still retained in the queue's event tables (read or not), and
-- the events pending for the group - committed, not yet done by it: after
-- its cursor's position (leased, unacknowledged events count), including
-- events not ticked yet; replays addressed to other groups are left out.
-- A partition the group has no cursor for is judged from the group's
-- subscription; queue mode without one counts every retained event (it
-- never skips the backlog). The counts scan the partition's events: this is
-- a status read, not a hot path.
-- Errors: unknown queue, or a named group that has not subscribed to the
-- queue -> undefined_object.
-- Returns: (partition_name, partition_uuid, retained, pending).
-- VOLATILE: the count statement takes its snapshot after locking the
-- group_cursor children, so a rotation it waited behind committed before
-- it and the moved cursors are seen (STABLE, it read with the caller's
-- older snapshot: every cursor missed, pending counted from the
-- subscription; docs/design/broker.md "Rotation").
-- Locks: ACCESS SHARE on the group_cursor children. Writes: nothing.
-- Called by: the broker (GET /api/v1/status/queues/:queue), operators.
CREATE OR REPLACE FUNCTION pgque.queue_depth(i_queue_name text, i_group text DEFAULT pgque.queue_mode_group())
RETURNS TABLE (partition_name text, partition_uuid uuid, retained bigint, pending bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue    pgque.queue := pgque.find_queue(i_queue_name);
    v_group    text := pgque.group_name_or_default(i_group);
    v_group_id int;
    v_tables   int[];
    v_retained text[] := '{}';
    v_n        int;
    v_guc      text[];
BEGIN
    SELECT g.grp_id INTO v_group_id FROM pgque.broker_group g WHERE g.grp_name = v_group;
    IF v_group <> pgque.queue_mode_group() AND NOT EXISTS (
            SELECT 1 FROM pgque.group_subscription gs WHERE gs.gs_queue = v_queue.queue_id AND gs.gs_group = v_group_id) THEN
        RAISE EXCEPTION 'pgque: consumer group "%" has not subscribed to queue "%"', left(v_group, 255), i_queue_name
            USING ERRCODE = 'undefined_object', HINT = 'A group subscribes on its first pop.';
    END IF;
    v_tables := ARRAY(SELECT generate_series(0, v_queue.queue_ntables - 1));
    FOREACH v_n IN ARRAY v_tables LOOP
        v_retained := v_retained || format('SELECT 1 FROM %s e WHERE e.ev_partition = l.gc_partition',
                                           pgque.event_table(v_queue.queue_id, v_n));
    END LOOP;
    -- As in the generated functions (group_plans): the range reads must not
    -- take the (ev_txid) index and sort (once the event tables were
    -- analyzed it looks cheaper). Restored below (a SET clause would restore
    -- them, but the engine's SECURITY DEFINER functions carry exactly one,
    -- search_path: sql/security_test.go; an error rolls them back with the
    -- transaction or savepoint).
    v_guc := ARRAY[current_setting('enable_sort'), current_setting('enable_incremental_sort')];
    PERFORM set_config('enable_sort', 'off', true), set_config('enable_incremental_sort', 'off', true);
    RETURN QUERY EXECUTE format($sql$
        SELECT p.part_name, p.part_uuid,
               (SELECT count(*) FROM (%s) r),
               (SELECT count(*) FROM (%s) a) + (SELECT count(*) FROM (%s) b)
          FROM pgque.partition p
          LEFT JOIN pgque.group_cursor gc ON gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = p.part_id
          LEFT JOIN pgque.group_subscription gs ON gs.gs_queue = $1 AND gs.gs_group = $2
         CROSS JOIN LATERAL (
               SELECT p.part_id AS gc_partition,
                      coalesce(gc.gc_lo, gs.gs_lo, '1:1:'::pg_snapshot) AS gc_lo,
                      coalesce(gc.gc_hi, gs.gs_lo, '1:1:'::pg_snapshot) AS gc_hi,
                      gc.gc_pos_txid, gc.gc_pos,
                      CASE WHEN gc.gc_partition IS NULL THEN gs.gs_from ELSE gc.gc_from END AS gc_from) l
         WHERE p.part_queue = $1
         ORDER BY p.part_id
        $sql$,
        array_to_string(v_retained, ' UNION ALL '),
        pgque.group_range_sql(v_queue.queue_id, v_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos', NULL, NULL, '-$2', 'l.gc_from'),
        pgque.group_range_sql(v_queue.queue_id, v_tables, 'l.gc_hi', '$3', NULL, NULL, NULL, NULL, '-$2', 'l.gc_from'))
    USING v_queue.queue_id, v_group_id, pg_current_snapshot();
    PERFORM set_config('enable_sort', v_guc[1], true), set_config('enable_incremental_sort', v_guc[2], true);
END;
$$;
