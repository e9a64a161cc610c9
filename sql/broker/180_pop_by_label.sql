-- pgque.pop_by_label(i_namespace, i_task, i_group, i_batch,
-- i_max_partitions, i_lease_seconds, i_auto_ack, i_mode, i_from, i_tenant):
-- a pop across the queues of broker tenant i_tenant (queue_in_tenant;
-- NULL: every queue) labelled with namespace and / or task
-- (configure_queue; at least one of them, else invalid_parameter_value):
-- the wildcard pop (pop_any) of each such queue in name order until one
-- yields messages. A label matching another tenant's queue finds nothing.
-- Returns: as pop_list, plus queue_name. Locks/writes: as pop_any.
-- Called by: the broker (GET /api/v1/pop?namespace=&task=).
DO $drop$
BEGIN
    -- Earlier installs had no i_tenant: a new argument list is a new function, so
    -- the old one goes (re-running the install keeps this one).
    IF to_regprocedure('pgque.pop_by_label(text, text, text, int, int, int, boolean, text, timestamptz)') IS NOT NULL THEN
        DROP FUNCTION pgque.pop_by_label(text, text, text, int, int, int, boolean, text, timestamptz);
    END IF;
END;
$drop$;
CREATE OR REPLACE FUNCTION pgque.pop_by_label(i_namespace text, i_task text, i_group text, i_batch int,
                                              i_max_partitions int DEFAULT 1, i_lease_seconds int DEFAULT NULL,
                                              i_auto_ack boolean DEFAULT false, i_mode text DEFAULT NULL,
                                              i_from timestamptz DEFAULT NULL, i_tenant text DEFAULT NULL)
RETURNS TABLE (queue_name text, partition_id int, partition_uuid uuid, partition_name text, verdict text,
               drained boolean, until timestamptz, lease_id uuid, message_id uuid, transaction_id text,
               payload text, created_at timestamptz, delivery_attempt int, ev_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_name text;
    v_took boolean;
    r      record;
BEGIN
    IF nullif(i_namespace, '') IS NULL AND nullif(i_task, '') IS NULL THEN
        RAISE EXCEPTION 'pgque: a pop by label needs a namespace or a task' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR v_name IN SELECT q.queue_name FROM pgque.queue q
                   WHERE (nullif(i_namespace, '') IS NULL OR q.queue_options ->> 'namespace' = i_namespace)
                     AND (nullif(i_task, '') IS NULL OR q.queue_options ->> 'task' = i_task)
                     AND pgque.queue_in_tenant(q.queue_name, i_tenant)
                   ORDER BY q.queue_name LOOP
        v_took := false;
        FOR r IN SELECT * FROM pgque.pop_any(v_name, i_group, i_batch, i_max_partitions, i_lease_seconds,
                                             i_auto_ack, i_mode, i_from) LOOP
            queue_name := v_name; partition_id := r.partition_id; partition_uuid := r.partition_uuid;
            partition_name := r.partition_name; verdict := r.verdict; drained := r.drained; until := r.until;
            lease_id := r.lease_id; message_id := r.message_id; transaction_id := r.transaction_id;
            payload := r.payload; created_at := r.created_at; delivery_attempt := r.delivery_attempt; ev_id := r.ev_id;
            v_took := v_took OR r.verdict = 'took';
            RETURN NEXT;
        END LOOP;
        EXIT WHEN v_took;
    END LOOP;
END;
$$;
