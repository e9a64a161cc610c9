-- pgque.message_list(i_tenant, i_queue, i_partition, i_namespace, i_task,
-- i_status, i_from, i_to, i_limit, i_offset): one page of messages, newest
-- first (created_at, then event id, descending), of the queues the broker
-- tenant i_tenant owns (queue_in_tenant: NULL every tenant's, '' the default
-- tenant's), filtered by stored queue name,
-- partition name, stored namespace / task label and status (NULL: any).
-- The time window is Queen's: created at or after i_from (default an hour
-- ago) and before the minute after i_to (default now). Deleted messages
-- (message_tombstone) and classic consumers' retry copies (ev_owner > 0)
-- are left out. Every retained event table of each matching queue is read
-- (sequentially: event tables have no ev_time index), each keeping its
-- i_offset + i_limit newest rows when no status filter is given; the
-- status of the rows kept is computed (message_status). A status read for
-- dashboards and operators, not a hot path; offset paging, as Queen.
-- Errors: i_limit outside 1..10000 or a negative i_offset ->
-- invalid_parameter_value.
-- Returns: (queue_name, partition_uuid, partition_name, message_id,
-- transaction_id, data, created_at, namespace, task, priority, status,
-- consumed_by, total_groups, queue_lease).
-- Locks: none. Writes: nothing. Called by: the broker (GET /api/v1/messages).
--
-- pgque.message_mode(i_tenant, i_queue): the consumption mode over the
-- queues a message listing covers (the tenant's, or one stored queue
-- name): whether the queue-mode group __QUEUE_MODE__ is subscribed to any
-- of them, and how many distinct named groups are.
-- Returns: (has_queue_mode, bus_groups). Locks: none. Writes: nothing.
-- Called by: the broker (GET /api/v1/messages, GET /api/v1/messages/:p/:t).
CREATE OR REPLACE FUNCTION pgque.message_list(i_tenant text, i_queue text, i_partition text, i_namespace text,
                                              i_task text, i_status text, i_from timestamptz, i_to timestamptz,
                                              i_limit int DEFAULT 200, i_offset int DEFAULT 0)
RETURNS TABLE (queue_name text, partition_uuid uuid, partition_name text, message_id uuid, transaction_id text,
               data text, created_at timestamptz, namespace text, task text, priority jsonb, status text,
               consumed_by int, total_groups int, queue_lease timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_from  timestamptz := coalesce(i_from, now() - interval '1 hour');
    v_to    timestamptz := date_trunc('minute', coalesce(i_to, now())) + interval '1 minute';
    v_parts text[] := '{}';
    v_top   text := '';
    v_q     record;
    v_n     int;
BEGIN
    IF coalesce(i_limit, 200) NOT BETWEEN 1 AND 10000 OR coalesce(i_offset, 0) < 0 THEN
        RAISE EXCEPTION 'pgque: message page: limit 1..10000, offset >= 0 (got %, %)', i_limit, i_offset
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    i_limit := coalesce(i_limit, 200);
    i_offset := coalesce(i_offset, 0);
    IF i_status IS NULL THEN
        v_top := format(' ORDER BY e.ev_time DESC, e.ev_id DESC LIMIT %s', i_limit::bigint + i_offset);
    END IF;
    FOR v_q IN
        SELECT q.queue_id, q.queue_ntables, pt.part_id
          FROM pgque.queue q
          LEFT JOIN pgque.partition pt ON pt.part_queue = q.queue_id AND pt.part_name = i_partition
         WHERE pgque.queue_in_tenant(q.queue_name, i_tenant)
           AND (i_queue IS NULL OR q.queue_name = i_queue)
           AND (i_namespace IS NULL OR q.queue_options ->> 'namespace' = i_namespace)
           AND (i_task IS NULL OR q.queue_options ->> 'task' = i_task)
           AND (i_partition IS NULL OR pt.part_id IS NOT NULL)
         ORDER BY q.queue_id
    LOOP
        FOR v_n IN 0 .. v_q.queue_ntables - 1 LOOP
            v_parts := v_parts || format(
                '(SELECT %1$s AS qid, e.ev_id, e.ev_time, e.ev_txid, e.ev_data, e.ev_extra1, e.ev_owner, e.ev_partition '
                'FROM %2$s e WHERE e.ev_time >= $1 AND e.ev_time < $2 AND (e.ev_owner IS NULL OR e.ev_owner < 0) %3$s'
                'AND NOT EXISTS (SELECT 1 FROM pgque.message_tombstone t WHERE t.mt_queue = %1$s AND t.mt_ev_id = e.ev_id)%4$s)',
                v_q.queue_id, pgque.event_table(v_q.queue_id, v_n),
                CASE WHEN v_q.part_id IS NOT NULL THEN format('AND e.ev_partition = %s ', v_q.part_id) ELSE '' END,
                v_top);
        END LOOP;
    END LOOP;
    IF cardinality(v_parts) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format($sql$
        SELECT q.queue_name, p.part_uuid, p.part_name, m.id, coalesce(x.ev_extra1, m.id::text), x.ev_data, x.ev_time,
               q.queue_options ->> 'namespace', q.queue_options ->> 'task', q.queue_options -> 'priority',
               s.status, s.consumed_by, s.total_groups, s.queue_lease
          FROM (%s) x
          JOIN pgque.queue q ON q.queue_id = x.qid
          JOIN pgque.partition p ON p.part_queue = x.qid AND p.part_id = x.ev_partition
         CROSS JOIN LATERAL (SELECT pgque.message_uuid(x.qid, x.ev_id, x.ev_time) AS id) m
         CROSS JOIN LATERAL pgque.message_status(x.qid, x.ev_partition, x.ev_id, x.ev_txid, x.ev_time, x.ev_owner) s
         WHERE $3::text IS NULL OR s.status = $3
         ORDER BY x.ev_time DESC, x.qid DESC, x.ev_id DESC
         LIMIT $4 OFFSET $5
        $sql$, array_to_string(v_parts, ' UNION ALL ')) USING v_from, v_to, i_status, i_limit, i_offset;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.message_mode(i_tenant text, i_queue text)
RETURNS TABLE (has_queue_mode boolean, bus_groups int)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT coalesce(bool_or(g.grp_name = pgque.queue_mode_group()), false),
           (count(DISTINCT g.grp_id) FILTER (WHERE g.grp_name <> pgque.queue_mode_group()))::int
      FROM pgque.queue q
      JOIN pgque.group_subscription gs ON gs.gs_queue = q.queue_id
      JOIN pgque.broker_group g ON g.grp_id = gs.gs_group
     WHERE pgque.queue_in_tenant(q.queue_name, i_tenant) AND (i_queue IS NULL OR q.queue_name = i_queue);
$$;
