-- pgque.group_lease_live(i_lease, i_tenant): whether lease id i_lease holds
-- at least one live lease (a cursor leased by it whose expiry is still
-- ahead) on a queue of broker tenant i_tenant (NULL: any queue;
-- pgque.queue_in_tenant). NULL is not live.
-- VOLATILE, not STABLE: its read of the rotated group_cursor then takes
-- its own snapshot after its lock on the children, so a rotation it waited
-- behind (rows moved to the next child, the old child TRUNCATEd) committed
-- before that snapshot and the live lease is seen where it moved. STABLE,
-- it read with the caller's statement snapshot, taken before the wait: the
-- moved rows invisible, the old child empty - a live lease read as expired
-- (docs/design/broker.md "Rotation").
-- Returns: boolean. Locks: ACCESS SHARE on the group_cursor children.
-- Writes: nothing.
-- Called by: the broker (POST /api/v1/transaction, requiredLeases).
DO $drop$
BEGIN
    -- Earlier installs had no i_tenant: a new argument list is a new function, so
    -- the old one goes (re-running the install keeps this one).
    IF to_regprocedure('pgque.group_lease_live(uuid)') IS NOT NULL THEN
        DROP FUNCTION pgque.group_lease_live(uuid);
    END IF;
END;
$drop$;
CREATE OR REPLACE FUNCTION pgque.group_lease_live(i_lease uuid, i_tenant text DEFAULT NULL)
RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM pgque.group_cursor gc
                    WHERE gc.gc_lease = i_lease AND gc.gc_lease_until > clock_timestamp()
                      AND EXISTS (SELECT 1 FROM pgque.queue q
                                   WHERE q.queue_id = gc.gc_queue AND pgque.queue_in_tenant(q.queue_name, i_tenant)));
$$;
