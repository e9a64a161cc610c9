-- pgque.group_ack(i_group, i_transaction_ids, i_partition_ids, i_statuses,
-- i_lease_ids, i_errors): acknowledge messages of a consumer group, item i
-- being (transactionId, partition UUID, status, lease id or NULL, error
-- text or NULL), processed in order. Status: NULL / completed / success /
-- acked / ok -> completed: the cursor moves to the message (earlier ones
-- count as done); the lease is released when it reaches the batch end.
-- 'retry' -> earlier ones done, the lease released, the message redelivered
-- without spending a retry. 'dlq' -> dead-lettered now, the cursor moves
-- past it. Anything else -> failed: spends one retry; once more than
-- retryLimit (default 3) failures were spent on it, it is dead-lettered
-- (deadLetterQueue and dlqAfterMaxRetries, default true; else dropped) and
-- the cursor moves past that message only; otherwise as 'retry'.
-- A message at or below the cursor -> success, noop. A wrong or expired
-- lease -> success false, 'invalid or expired lease'; an unknown partition
-- -> success false. Returns: (idx 0-based, transaction_id, success, error,
-- lease_released, dlq, noop, queue_name, partition_id) per item (the last
-- two NULL for an unknown partition).
-- Locks: each item's cursor row (FOR UPDATE, waits). Writes: group_cursor
-- (one UPDATE per item), group_dead_letter. Called by: the broker (ack,
-- ack batch, transactions).
CREATE OR REPLACE FUNCTION pgque.group_ack(i_group text, i_transaction_ids text[], i_partition_ids uuid[],
                                           i_statuses text[], i_lease_ids uuid[], i_errors text[])
RETURNS TABLE (idx int, transaction_id text, success boolean, error text, lease_released boolean, dlq boolean, noop boolean,
               queue_name text, partition_id int)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_n      int := coalesce(cardinality(i_transaction_ids), 0);
    v_group  int;
    v_part   pgque.partition;
    v_queue  pgque.queue;
    v_opts   jsonb;
    v_gc     pgque.group_cursor;
    v_status text;
    v_ev     record;
    v_prev   record;
    v_live   boolean;
    v_end    boolean;
    v_dlq    boolean;
    v_fails  int;
    v_lim    int;
    v_find   text;
BEGIN
    IF cardinality(i_partition_ids) IS DISTINCT FROM v_n
       OR (i_statuses IS NOT NULL AND cardinality(i_statuses) <> v_n)
       OR (i_lease_ids IS NOT NULL AND cardinality(i_lease_ids) <> v_n)
       OR (i_errors IS NOT NULL AND cardinality(i_errors) <> v_n) THEN
        RAISE EXCEPTION 'pgque: group_ack needs one transaction id, partition id (and status, lease id, error when given) per item'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT grp_id INTO v_group FROM pgque.broker_group WHERE grp_name = coalesce(nullif(i_group, ''), '__QUEUE_MODE__');
    FOR i IN 1 .. v_n LOOP
        idx := i - 1;
        transaction_id := i_transaction_ids[i];
        success := false; error := NULL; lease_released := false; dlq := false; noop := false;
        queue_name := NULL; partition_id := NULL;
        v_status := lower(coalesce(i_statuses[i], 'completed'));
        v_status := CASE WHEN v_status IN ('completed', 'success', 'acked', 'ok', '') THEN 'completed'
                         WHEN v_status IN ('retry', 'dlq') THEN v_status ELSE 'failed' END;
        SELECT * INTO v_part FROM pgque.partition WHERE part_uuid = i_partition_ids[i];
        IF transaction_id IS NULL OR NOT FOUND THEN
            error := CASE WHEN transaction_id IS NULL THEN 'transactionId is required' ELSE 'unknown partition' END;
            RETURN NEXT;
            CONTINUE;
        END IF;
        partition_id := v_part.part_id;
        queue_name := (SELECT q.queue_name FROM pgque.queue q WHERE q.queue_id = v_part.part_queue);
        SELECT * INTO v_gc FROM pgque.group_cursor gc
         WHERE gc.gc_queue = v_part.part_queue AND gc.gc_group = v_group AND gc.gc_partition = v_part.part_id
           FOR UPDATE;
        IF NOT FOUND THEN
            error := 'invalid or expired lease';
            RETURN NEXT;
            CONTINUE;
        END IF;
        SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = v_part.part_queue;
        v_find := 'SELECT x.* FROM (SELECT $10::int AS gc_partition) l CROSS JOIN LATERAL ('
               || pgque.group_range_sql(v_queue.queue_id,
                      ARRAY[v_queue.queue_cur_table, (v_queue.queue_cur_table + v_queue.queue_ntables - 1) % v_queue.queue_ntables],
                      '$1', '$2', '$3', '$4', '$5', NULL, '-$6', '$7')
               || ') x WHERE (x.ev_extra1 = $8 OR (x.ev_extra1 IS NULL AND pgque.message_uuid($9, x.ev_id, x.ev_time)::text = $8)) '
               || 'AND ($5 IS NULL OR (x.ev_txid, x.ev_id) <= ($5, $11)) ORDER BY x.ev_txid, x.ev_id LIMIT 1';
        v_live := v_gc.gc_lease IS NOT NULL AND v_gc.gc_lease_until > now()
                  AND (i_lease_ids[i] IS NULL OR i_lease_ids[i] = v_gc.gc_lease);
        SELECT NULL::bigint AS ev_id, NULL::timestamptz AS ev_time, NULL::xid8 AS ev_txid, NULL::text AS ev_data,
               NULL::text AS ev_extra1 INTO v_ev;
        IF v_live THEN
            -- In the leased batch: after the position, up to the batch end.
            EXECUTE v_find INTO v_ev
              USING v_gc.gc_lo, v_gc.gc_hi, v_gc.gc_pos_txid, v_gc.gc_pos, v_gc.gc_end_txid, v_group, v_gc.gc_from,
                    transaction_id, v_queue.queue_id, v_part.part_id, v_gc.gc_lease_end;
            IF v_ev.ev_id IS NULL THEN
                success := true; noop := true;   -- at or below the cursor (or not in this batch)
                RETURN NEXT;
                CONTINUE;
            END IF;
        ELSE
            -- No (matching) live lease: only an ack at or below the cursor is fine.
            IF v_gc.gc_pos IS NOT NULL THEN
                EXECUTE v_find INTO v_ev
                  USING v_gc.gc_lo, v_gc.gc_hi, NULL::xid8, NULL::bigint, v_gc.gc_pos_txid, v_group, v_gc.gc_from,
                        transaction_id, v_queue.queue_id, v_part.part_id, v_gc.gc_pos;
            END IF;
            IF v_ev.ev_id IS NOT NULL THEN
                success := true; noop := true;
            ELSE
                error := 'invalid or expired lease';
            END IF;
            RETURN NEXT;
            CONTINUE;
        END IF;
        v_opts := pgque.broker_options(v_queue.queue_options);
        v_lim := (v_opts ->> 'retryLimit')::int;
        v_end := v_ev.ev_id = v_gc.gc_lease_end;
        v_fails := CASE WHEN v_gc.gc_fail_ev = v_ev.ev_id THEN v_gc.gc_fails ELSE 0 END + 1;
        IF v_status = 'failed' AND v_fails > v_lim THEN
            v_status := 'exhausted';
        END IF;
        IF v_status IN ('retry', 'failed') THEN
            SELECT NULL::xid8 AS ev_txid, NULL::bigint AS ev_id INTO v_prev;
            EXECUTE 'SELECT x.ev_txid, x.ev_id FROM (SELECT $6::int AS gc_partition) l CROSS JOIN LATERAL ('
                 || pgque.group_range_sql(v_queue.queue_id,
                        ARRAY[v_queue.queue_cur_table, (v_queue.queue_cur_table + v_queue.queue_ntables - 1) % v_queue.queue_ntables],
                        '$1', '$2', '$3', '$4', '$5', NULL, '-$7', '$8')
                 || ') x WHERE (x.ev_txid, x.ev_id) < ($5, $9) ORDER BY x.ev_txid DESC, x.ev_id DESC LIMIT 1'
               INTO v_prev
              USING v_gc.gc_lo, v_gc.gc_hi, v_gc.gc_pos_txid, v_gc.gc_pos, v_ev.ev_txid, v_part.part_id, v_group,
                    v_gc.gc_from, v_ev.ev_id;
            UPDATE pgque.group_cursor gc
               SET gc_pos_txid = CASE WHEN v_prev.ev_id IS NULL THEN gc.gc_pos_txid ELSE v_prev.ev_txid END,
                   gc_pos = CASE WHEN v_prev.ev_id IS NULL THEN gc.gc_pos ELSE v_prev.ev_id END,
                   gc_lease = NULL, gc_lease_until = NULL, gc_end_txid = NULL, gc_lease_end = NULL,
                   gc_fail_ev = CASE WHEN v_status = 'failed' THEN v_ev.ev_id ELSE gc.gc_fail_ev END,
                   gc_fails = CASE WHEN v_status = 'failed' THEN v_fails ELSE gc.gc_fails END,
                   gc_active = now()
             WHERE gc.gc_queue = v_gc.gc_queue AND gc.gc_group = v_gc.gc_group AND gc.gc_partition = v_gc.gc_partition;
            success := true; lease_released := true;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_status = 'dlq' AND (v_opts ->> 'deadLetterQueue')::boolean
           OR v_status = 'exhausted' AND (v_opts ->> 'deadLetterQueue')::boolean AND (v_opts ->> 'dlqAfterMaxRetries')::boolean THEN
            INSERT INTO pgque.group_dead_letter (gdl_queue, gdl_group, gdl_partition, gdl_msg, gdl_txn, gdl_ev_id,
                                                 gdl_created, gdl_data, gdl_error, gdl_retries)
            VALUES (v_queue.queue_id, v_group, v_part.part_id, pgque.message_uuid(v_queue.queue_id, v_ev.ev_id, v_ev.ev_time),
                    transaction_id, v_ev.ev_id, v_ev.ev_time, v_ev.ev_data, i_errors[i], v_fails - 1)
            ON CONFLICT (gdl_queue, gdl_group, gdl_ev_id) DO NOTHING;
            dlq := true;
        END IF;
        UPDATE pgque.group_cursor gc
           SET gc_pos_txid = v_ev.ev_txid, gc_pos = v_ev.ev_id,
               gc_lease = CASE WHEN v_end THEN NULL ELSE gc.gc_lease END,
               gc_lease_until = CASE WHEN v_end THEN NULL ELSE gc.gc_lease_until END,
               gc_end_txid = CASE WHEN v_end THEN NULL ELSE gc.gc_end_txid END,
               gc_lease_end = CASE WHEN v_end THEN NULL ELSE gc.gc_lease_end END,
               gc_attempts = CASE WHEN v_end THEN 0 ELSE gc.gc_attempts END,
               gc_fail_ev = NULL, gc_fails = 0,
               gc_active = now()
         WHERE gc.gc_queue = v_gc.gc_queue AND gc.gc_group = v_gc.gc_group AND gc.gc_partition = v_gc.gc_partition;
        success := true; lease_released := v_end;
        RETURN NEXT;
    END LOOP;
END;
$$;
