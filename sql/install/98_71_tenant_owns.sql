-- pgque.tenant_owns(i_tenant, i_queue_name): whether a stored queue name
-- belongs to a broker tenant. The default tenant ('' or NULL) stores a
-- queue under its own name (no U+241F in it); tenant t stores q as
-- 't' || U+241F || 'q' (internal/httpapi/tenant.go).
-- Returns: boolean. Locks: none. Writes: nothing.
-- Called by: message_list, message_get, message_delete.
CREATE OR REPLACE FUNCTION pgque.tenant_owns(i_tenant text, i_queue_name text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT CASE WHEN coalesce(i_tenant, '') = '' THEN strpos(i_queue_name, U&'\241F') = 0
                ELSE starts_with(i_queue_name, i_tenant || U&'\241F') END;
$$;
