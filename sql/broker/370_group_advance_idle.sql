-- pgque.group_advance_idle(i_queue_id): let idle consumer groups stop
-- pinning the queue's event-table rotation. Seeds a cursor for every
-- (subscribed group, partition) pair that has none yet, then moves the
-- subscription snapshot to S = pg_current_snapshot() (partitions created
-- later can only hold later events); then every cursor that holds no live
-- lease and has no pending event up to S gets its range reset to (S, S].
-- Nothing a group may still read is skipped, and no range end moves back:
-- a cursor (or subscription) whose snapshot is not at or before S - a
-- claim that committed after S was taken closed its range at a later
-- snapshot - is left alone (resetting it to S would deliver again what it
-- consumed after S). S is taken before the UPDATE's own snapshot, so what
-- S sees, the UPDATE sees.
-- Only cursors (and subscriptions) whose start's xmin - what the rotation
-- pin reads - would rise are written: S is new on every call.
-- Returns: cursors advanced. Locks: the advanced cursor rows (FOR UPDATE
-- SKIP LOCKED: a busy cursor is not idle), as group_seed.
-- Writes: group_cursor, group_subscription. The UPDATE runs in the queue's
-- generated function pgque.group_advance_idle_q<queue>_t<table> (group_plans).
-- Called by: group_rotation_pin.
CREATE OR REPLACE FUNCTION pgque.group_advance_idle(i_queue_id int)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_snap  pg_snapshot;
    v_grp   int;
    v_n     int;
BEGIN
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    v_snap := pg_current_snapshot();
    FOR v_grp IN SELECT gs.gs_group FROM pgque.group_subscription gs WHERE gs.gs_queue = i_queue_id LOOP
        PERFORM pgque.group_seed(i_queue_id, v_grp, ARRAY(SELECT p.part_id FROM pgque.partition p WHERE p.part_queue = i_queue_id));
        -- (only forward: gs_lo at or before S, as the cursors below)
        UPDATE pgque.group_subscription SET gs_lo = v_snap
         WHERE gs_queue = i_queue_id AND gs_group = v_grp AND pg_snapshot_xmin(gs_lo) < pg_snapshot_xmin(v_snap)
           AND pg_snapshot_xmax(gs_lo) <= pg_snapshot_xmax(v_snap)
           AND NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(v_snap) x WHERE pg_visible_in_snapshot(x, gs_lo));
    END LOOP;
    -- generated: pgque.group_advance_idle_q<queue>_t<current table> (group_plans)
    EXECUTE format('SELECT pgque.%I($1, $2, $3)', 'group_advance_idle_q' || i_queue_id || '_t' || v_queue.queue_cur_table)
       INTO v_n
    USING i_queue_id, v_snap, NULL::bigint;
    RETURN v_n;
END;
$$;
