-- pgque.queue_in_tenant(i_queue_name, i_tenant): whether a stored queue
-- name belongs to a broker tenant. The broker stores tenant t's queue q as
-- "t<U+241F>q" and the default tenant's as plain "q" (queue names may not
-- hold U+241F, nor may tenants), so i_tenant '' matches names without
-- U+241F, i_tenant t matches names starting "t<U+241F>", and NULL (a caller
-- that is not a broker tenant: the engine, an administrator) matches every
-- name. The broker functions that take an id, a label or a tenant
-- (group_ack, group_lease_extend, group_lease_live, group_dlq_list,
-- group_dlq_replay, pop_by_label, message_list, message_mode, message_get,
-- message_delete) filter the queue through it, so another tenant's id
-- behaves as one that does not exist. The one home of the tenant rule in
-- SQL (Go: internal/httpapi/tenant.go); U+241F is written chr(9247), which
-- parses the same whatever standard_conforming_strings says.
-- Returns: boolean. Locks: none. Writes: nothing.
-- Called by: those functions (granted to nobody).
CREATE OR REPLACE FUNCTION pgque.queue_in_tenant(i_queue_name text, i_tenant text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT i_tenant IS NULL
        OR CASE WHEN i_tenant = '' THEN strpos(i_queue_name, chr(9247)) = 0
                ELSE starts_with(i_queue_name, i_tenant || chr(9247)) END;
$$;
-- An earlier build had a second copy of this rule, tenant_owns (NULL meant
-- the default tenant there); its callers now use queue_in_tenant.
DROP FUNCTION IF EXISTS pgque.tenant_owns(text, text);
