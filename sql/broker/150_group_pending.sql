-- pgque.group_pending(i_queue_id, i_group_id, i_after, i_limit,
-- i_include_leased): the partitions of a queue, by id after i_after (NULL:
-- from the start), at most i_limit (NULL: all), that probably have work for
-- the group: an event after the cursor's position (its open range, or the
-- range up to the current snapshot, as a claim would take it: no tick is
-- needed for a committed push to count); a partition the group has no cursor for is
-- judged from the group's subscription (none yet: from the oldest event).
-- Partitions under a live lease are left out unless i_include_leased.
-- Candidates first (one ev_txid range scan of the live event tables from
-- the least position the group's cursors may not have consumed, plus
-- lease-held cursors), then the exact probe on those only: the cost grows
-- with the events above the group's oldest unconsumed position and with
-- the candidates, not with idle partitions (bar a read of the group's
-- cursor rows; past 64 events per partition every partition is probed,
-- as before). Stale in excess only: a listed partition may be empty.
-- Returns: (partition_id, lease_until (live leases only), last_active).
-- The probe runs in the queue's generated function
-- pgque.group_pending_q<queue>_t<current table> (group_plans).
-- VOLATILE, as is the generated function: the probe takes its snapshot
-- after locking the rotated table it reads (group_cursor), so a rotation it waited behind committed before
-- that snapshot and its moved rows are seen. STABLE, both read with the
-- caller's snapshot, taken before the wait: a cursor moved by the rotation
-- was missed - its live lease left out, the partition judged from the
-- subscription (docs/design/broker.md "Rotation").
-- Locks: ACCESS SHARE on the group_cursor children.
-- Called by: pop_any (wildcard pop), group_reseed.
CREATE OR REPLACE FUNCTION pgque.group_pending(i_queue_id int, i_group_id int, i_after int, i_limit int,
                                               i_include_leased boolean)
RETURNS TABLE (partition_id int, lease_until timestamptz, last_active timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue  pgque.queue;
    v_snap   pg_snapshot;
BEGIN
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- the next range's end, as pop_list takes it (older than the probe's
    -- own snapshot: what it sees, the probe sees)
    v_snap := pg_current_snapshot();
    -- generated: pgque.group_pending_q<queue>_t<current table> (group_plans)
    RETURN QUERY EXECUTE format('SELECT * FROM pgque.%I($1, $2, $3, $4, $5, $6)',
                                'group_pending_q' || i_queue_id || '_t' || v_queue.queue_cur_table)
    USING i_queue_id, i_group_id, i_after, i_limit, coalesce(i_include_leased, false), v_snap;
END;
$$;
