-- pgque.group_rotation_pin(i_queue_id, i_switch): what consumer groups need
-- kept of the queue's event tables, for maint_rotate_tables_step1: the
-- group_rotation_xmin; when that is at or below i_switch (the previous
-- switch's step-2 txid, so it would block the next switch), idle cursors
-- are advanced first (group_advance_idle) and, if still blocked, cursors
-- whose events up to the switch are all expired (group_expire; queues with
-- retentionEnabled / maxWaitTimeSeconds only), and it is computed again.
-- Returns: xid8, NULL without groups. Locks: as group_advance_idle and
-- group_expire. Writes: as group_advance_idle and group_expire.
-- Called by: maint_rotate_tables_step1.
CREATE OR REPLACE FUNCTION pgque.group_rotation_pin(i_queue_id int, i_switch xid8)
RETURNS xid8
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_min xid8 := pgque.group_rotation_xmin(i_queue_id);
BEGIN
    IF v_min IS NOT NULL AND v_min <= i_switch THEN
        PERFORM pgque.group_advance_idle(i_queue_id);
        v_min := pgque.group_rotation_xmin(i_queue_id);
        IF v_min IS NOT NULL AND v_min <= i_switch AND pgque.group_expire(i_queue_id, i_switch) > 0 THEN
            v_min := pgque.group_rotation_xmin(i_queue_id);
        END IF;
    END IF;
    RETURN v_min;
END;
$$;
