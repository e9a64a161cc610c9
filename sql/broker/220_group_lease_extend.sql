-- pgque.group_lease_extend(i_lease_id, i_seconds, i_tenant): extend every
-- live lease held by that lease id (one pop may lease several partitions)
-- on the queues of broker tenant i_tenant (queue_in_tenant; NULL: every
-- queue: another tenant's lease is one that does not exist) to at least
-- now + i_seconds (NULL: 60); never shortens one. i_seconds < 1 raises.
-- Returns: (renewed: leases extended, expires_at: the latest new expiry,
-- NULL when none was live). Locks: those cursor rows (UPDATE waits).
-- Writes: group_cursor. Called by: the broker (POST /api/v1/lease/:id/extend).
DO $drop$
BEGIN
    -- Earlier installs had no i_tenant: a new argument list is a new function, so
    -- the old one goes (re-running the install keeps this one).
    IF to_regprocedure('pgque.group_lease_extend(uuid, int)') IS NOT NULL THEN
        DROP FUNCTION pgque.group_lease_extend(uuid, int);
    END IF;
END;
$drop$;
CREATE OR REPLACE FUNCTION pgque.group_lease_extend(i_lease_id uuid, i_seconds int DEFAULT 60,
                                                    i_tenant text DEFAULT NULL)
RETURNS TABLE (renewed int, expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    IF i_seconds < 1 THEN
        RAISE EXCEPTION 'pgque: a lease is extended by at least 1 second (got %)', i_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH u AS (
        UPDATE pgque.group_cursor gc
           SET gc_lease_until = greatest(gc.gc_lease_until, now() + make_interval(secs => coalesce(i_seconds, 60))),
               gc_active = now()
         WHERE gc.gc_lease = i_lease_id AND gc.gc_lease_until > now()
           AND (i_tenant IS NULL OR EXISTS (SELECT 1 FROM pgque.queue q
                                             WHERE q.queue_id = gc.gc_queue
                                               AND pgque.queue_in_tenant(q.queue_name, i_tenant)))
        RETURNING gc.gc_lease_until
    )
    SELECT count(*)::int, max(u.gc_lease_until) FROM u;
END;
$$;
