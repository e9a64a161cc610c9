-- pgque.message_find(i_tenant, i_partition, i_txn): the events a Queen
-- message address (partitionId, transactionId) names, in a queue the broker
-- tenant i_tenant owns (queue_in_tenant; another tenant's partition finds
-- nothing). A message's transactionId is its ev_extra1, else its message
-- id; the message id is accepted as the address too (the event id is
-- decoded from it, message_uuid, and checked by recomputing it). Several
-- rows when a dead letter was replayed (ev_owner = -group: a new event with
-- the same transactionId); classic consumers' retry copies (ev_owner > 0)
-- are left out. Each retained event table is read through the
-- (ev_partition, ev_txid, ev_id) index: the whole partition (an admin
-- route, not a hot path). Deleted messages are included (callers filter).
-- Returns: (queue_id, queue_name, part_id, part_name, ev_table, ev_id,
-- ev_txid, ev_time, ev_data, ev_extra1, ev_owner).
-- Locks: ACCESS SHARE on the queue's event tables until the caller's
-- transaction ends (so a rotation cannot truncate them under a delete).
-- Writes: nothing. Called by: message_get, message_delete.
--
-- pgque.message_get(i_tenant, i_partition, i_txn): one message by its Queen
-- address (message_find): the newest event of the address that is not
-- deleted, with its status (message_status), its queue's labels and broker
-- options, its newest dead letter's error and retry count, and per
-- subscribed consumer group whether it passed it and its live lease
-- holding it (arrays in the same order, by group name). No row: not found
-- (unknown or another tenant's partition, unknown transactionId, deleted).
-- Returns: (queue_name, partition_name, message_id, transaction_id, data,
-- created_at, namespace, task, options, status, queue_lease, error,
-- retry_count, group_names, group_passed, group_leases).
-- Locks: none. Writes: nothing. Called by: the broker
-- (GET /api/v1/messages/:partitionId/:transactionId).
CREATE OR REPLACE FUNCTION pgque.message_find(i_tenant text, i_partition uuid, i_txn text)
RETURNS TABLE (queue_id int, queue_name text, part_id int, part_name text, ev_table int, ev_id bigint,
               ev_txid xid8, ev_time timestamptz, ev_data text, ev_extra1 text, ev_owner int)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_queue pgque.queue;
    v_part  pgque.partition;
    v_uuid  uuid;
    v_id    bigint;
    v_n     int;
BEGIN
    SELECT p.* INTO v_part FROM pgque.partition p WHERE p.part_uuid = i_partition;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT q.* INTO v_queue FROM pgque.queue q WHERE q.queue_id = v_part.part_queue;
    IF NOT FOUND OR NOT pgque.queue_in_tenant(v_queue.queue_name, i_tenant) THEN
        RETURN;
    END IF;
    IF i_txn ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$' THEN
        v_uuid := i_txn::uuid;
        -- the low 54 bits of the last 8 bytes are the event id's (message_uuid)
        v_id := ('x' || substr(replace(v_uuid::text, '-', ''), 17, 16))::bit(64)::bigint & 18014398509481983;
    END IF;
    FOR v_n IN 0 .. v_queue.queue_ntables - 1 LOOP
        RETURN QUERY EXECUTE format(
            'SELECT $1, $2, $3, $4, $5, e.ev_id, e.ev_txid, e.ev_time, e.ev_data, e.ev_extra1, e.ev_owner FROM %s e '
            'WHERE e.ev_partition = $3 AND (e.ev_owner IS NULL OR e.ev_owner < 0) '
            'AND (e.ev_extra1 = $6 OR (e.ev_id = $7 AND pgque.message_uuid($1, e.ev_id, e.ev_time) = $8))',
            pgque.event_table(v_queue.queue_id, v_n))
        USING v_queue.queue_id, v_queue.queue_name, v_part.part_id, v_part.part_name, v_n, i_txn, v_id, v_uuid;
    END LOOP;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.message_get(i_tenant text, i_partition uuid, i_txn text)
RETURNS TABLE (queue_name text, partition_name text, message_id uuid, transaction_id text, data text,
               created_at timestamptz, namespace text, task text, options jsonb, status text,
               queue_lease timestamptz, error text, retry_count int,
               group_names text[], group_passed boolean[], group_leases timestamptz[])
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT f.queue_name, f.part_name, m.id, coalesce(f.ev_extra1, m.id::text), f.ev_data, f.ev_time,
           q.queue_options ->> 'namespace', q.queue_options ->> 'task', pgque.broker_options(q.queue_options),
           s.status, s.queue_lease, d.gdl_error, d.gdl_retries, g.names, g.passed, g.leases
      FROM (SELECT f.* FROM pgque.message_find(i_tenant, i_partition, i_txn) f
             WHERE NOT EXISTS (SELECT 1 FROM pgque.message_tombstone t
                                WHERE t.mt_queue = f.queue_id AND t.mt_ev_id = f.ev_id)
             ORDER BY f.ev_id DESC LIMIT 1) f
      JOIN pgque.queue q ON q.queue_id = f.queue_id
     CROSS JOIN LATERAL (SELECT pgque.message_uuid(f.queue_id, f.ev_id, f.ev_time) AS id) m
     CROSS JOIN LATERAL pgque.message_status(f.queue_id, f.part_id, f.ev_id, f.ev_txid, f.ev_time, f.ev_owner) s
      LEFT JOIN LATERAL (SELECT d.gdl_error, d.gdl_retries FROM pgque.group_dead_letter d
                          WHERE d.gdl_queue = f.queue_id AND d.gdl_ev_id = f.ev_id
                          ORDER BY d.gdl_failed_at DESC LIMIT 1) d ON true
     CROSS JOIN LATERAL (SELECT coalesce(array_agg(x.group_name ORDER BY x.group_name), '{}') AS names,
                                coalesce(array_agg(x.passed ORDER BY x.group_name), '{}') AS passed,
                                coalesce(array_agg(x.lease_until ORDER BY x.group_name), '{}') AS leases
                           FROM pgque.message_state(f.queue_id, f.part_id, f.ev_id, f.ev_txid, f.ev_time, f.ev_owner) x) g;
$$;
