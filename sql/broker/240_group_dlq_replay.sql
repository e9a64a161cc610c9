-- pgque.group_dlq_replay(i_id, i_tenant): move a group's dead letter back
-- (one of a queue of broker tenant i_tenant, queue_in_tenant; NULL: any
-- queue: another tenant's id is one that does not exist): it is
-- inserted again into its partition (the queue's current event table) with
-- ev_owner = -group id, so only that group receives it (classic consumers
-- and other groups skip it), and removed from the DLQ. Dedup is not
-- consulted (the same transactionId is the point of a replay).
-- Returns: one row (message_id: the new message id, queue_name: its
-- queue, so the caller can tick it, partition_id: the partition it went
-- back into, so the broker's hot-list can mark it), no row when no such
-- dead letter exists. Locks: the dead-letter row. Writes: event_<q>_<cur>, group_dead_letter.
-- Called by: the broker (POST /api/v1/dlq/:id/replay).
DO $drop$
BEGIN
    -- Earlier installs returned only the message id (uuid), then no
    -- partition_id: a new return type needs the old function gone
    -- (re-running the install keeps this one); later ones had no i_tenant.
    IF to_regprocedure('pgque.group_dlq_replay(bigint)') IS NOT NULL THEN
        DROP FUNCTION pgque.group_dlq_replay(bigint);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc
                WHERE oid = to_regprocedure('pgque.group_dlq_replay(bigint)')
                  AND (prorettype = 'uuid'::regtype OR NOT ('partition_id' = ANY (coalesce(proargnames, '{}'))))) THEN
        DROP FUNCTION pgque.group_dlq_replay(bigint);
    END IF;
END;
$drop$;
CREATE OR REPLACE FUNCTION pgque.group_dlq_replay(i_id bigint, i_tenant text DEFAULT NULL)
RETURNS TABLE (message_id uuid, queue_name text, partition_id int)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_dl    pgque.group_dead_letter;
    v_queue pgque.queue;
    v_id    bigint;
BEGIN
    DELETE FROM pgque.group_dead_letter d
     WHERE d.gdl_id = i_id
       AND (i_tenant IS NULL OR EXISTS (SELECT 1 FROM pgque.queue q
                                         WHERE q.queue_id = d.gdl_queue
                                           AND pgque.queue_in_tenant(q.queue_name, i_tenant)))
    RETURNING * INTO v_dl;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = v_dl.gdl_queue;
    EXECUTE format('INSERT INTO %s (ev_type, ev_data, ev_extra1, ev_partition, ev_owner) VALUES (''default'', $1, $2, $3, $4) RETURNING ev_id',
                   pgque.event_table(v_queue.queue_id, v_queue.queue_cur_table))
       INTO v_id
      USING v_dl.gdl_data, v_dl.gdl_txn, v_dl.gdl_partition, -v_dl.gdl_group;
    -- The DELETE above gave this transaction its xid before the queue row
    -- was read (insert_event's rule); a REPEATABLE READ / SERIALIZABLE
    -- caller read it through an older snapshot: 40001 after a table switch.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM pgque.check_insert_table(v_queue.queue_id, v_queue.queue_cur_table, v_queue.queue_ntables);
    END IF;
    message_id := pgque.message_uuid(v_queue.queue_id, v_id, now());
    queue_name := v_queue.queue_name;
    partition_id := v_dl.gdl_partition;
    RETURN NEXT;
END;
$$;
