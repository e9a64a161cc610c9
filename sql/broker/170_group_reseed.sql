-- pgque.group_reseed(i_queue, i_group, i_after, i_limit): one keyset page of
-- the partitions probably pending for (queue, group), by partition id after
-- i_after (NULL: from the start), at most i_limit (default 10000),
-- lease-held partitions included (with their lease expiry): the hot-list's
-- reseed floor. An unknown queue or group yields nothing. Stale in excess
-- only: a listed partition may turn out empty, a pending one is never left
-- out. Returns: (partition_id, partition_uuid, partition_name, lease_until).
-- It reads the rotated tables only through group_pending, which is
-- VOLATILE: those reads take their own snapshots after their locks
-- (docs/design/broker.md "Rotation").
-- Locks: as group_pending. Writes: nothing. Called by: the hot-list
-- (reseed), tests.
CREATE OR REPLACE FUNCTION pgque.group_reseed(i_queue text, i_group text, i_after int DEFAULT NULL, i_limit int DEFAULT 10000)
RETURNS TABLE (partition_id int, partition_uuid uuid, partition_name text, lease_until timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue int;
    v_group int;
BEGIN
    IF i_limit IS NULL OR i_limit < 1 THEN
        RAISE EXCEPTION 'pgque: group_reseed page size must be at least 1 (got %)', coalesce(i_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT q.queue_id INTO v_queue FROM pgque.queue q WHERE q.queue_name = i_queue;
    SELECT g.grp_id INTO v_group FROM pgque.broker_group g WHERE g.grp_name = pgque.group_name_or_default(i_group);
    IF v_queue IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT g.partition_id, p.part_uuid, p.part_name, g.lease_until
      FROM pgque.group_pending(v_queue, coalesce(v_group, 0), i_after, i_limit, true) g
      JOIN pgque.partition p ON p.part_queue = v_queue AND p.part_id = g.partition_id
     ORDER BY g.partition_id;
END;
$$;
