-- pgque.rotation_due_at(i_at): note that a rotation step left something
-- that only time will make due, at i_at: the transaction's setting
-- pgque.rotation_until (epoch seconds) becomes the earlier of itself and
-- i_at. rotate_metadata resets it to 'Infinity' before its steps and keeps
-- it with its idle key: until then, with nothing written and no time slot
-- turned, a call would find nothing to do.
-- Locks: none. Writes: nothing (a transaction-local setting).
-- Called by: rotate_family, group_rotate (no grant: SECURITY DEFINER
-- callers only).
CREATE OR REPLACE FUNCTION pgque.rotation_due_at(i_at timestamptz)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    PERFORM set_config('pgque.rotation_until',
        least(coalesce(nullif(current_setting('pgque.rotation_until', true), '')::float8, 'Infinity'),
              extract(epoch FROM i_at)::float8)::text, true);
END;
$$;
