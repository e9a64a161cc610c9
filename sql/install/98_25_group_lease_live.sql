-- pgque.group_lease_live(i_lease): whether lease id i_lease holds at least
-- one live lease (a cursor leased by it whose expiry is still ahead). NULL
-- is not live.
-- Returns: boolean. Locks: none. Writes: nothing.
-- Called by: the broker (POST /api/v1/transaction, requiredLeases).
CREATE OR REPLACE FUNCTION pgque.group_lease_live(i_lease uuid)
RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM pgque.group_cursor gc
                    WHERE gc.gc_lease = i_lease AND gc.gc_lease_until > clock_timestamp());
$$;
