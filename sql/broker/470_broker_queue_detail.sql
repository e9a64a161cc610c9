-- pgque.broker_queue_detail(i_queue_name): one queue as Queen's
-- get_queue_v2 shows it (GET /api/v1/resources/queues/:queue): id, name,
-- namespace, task, createdAt, partitions - one object per interned
-- partition, by name: id (its UUID), name, createdAt (null: partitions
-- carry no creation time), stats {total, pending, processing, completed,
-- failed (null: no failure counter), deadLetter}, oldestMessage,
-- newestMessage (ev_time of its oldest / newest retained event) - and
-- totals (the sums); plus options (broker_options) and notEnforced
-- (options_not_enforced). total: events retained in the event tables;
-- pending and processing: of the worst consumer group (named groups
-- subscribed to the queue, else queue mode, as Queen): pending per
-- queue_depth, processing the events under a live lease; deadLetter: the
-- partition's dead letters of every group; completed: total - pending -
-- deadLetter (at least 0). A status read: it scans the queue's events.
-- NULL for an unknown queue.
-- Returns: jsonb. Locks: none. Writes: nothing.
-- Called by: the broker (GET /api/v1/resources/queues/:queue).
CREATE OR REPLACE FUNCTION pgque.broker_queue_detail(i_queue_name text)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue  pgque.queue;
    v_tables int[];
    v_all    text[] := '{}';
    v_n      int;
    v_groups text[];
    v_ev     jsonb;
    v_lease  jsonb;
    v_pend   jsonb;
    v_parts  jsonb;
    v_totals jsonb;
BEGIN
    SELECT * INTO v_queue FROM pgque.queue q WHERE q.queue_name = i_queue_name;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_tables := ARRAY(SELECT generate_series(0, v_queue.queue_ntables - 1));
    FOREACH v_n IN ARRAY v_tables LOOP
        v_all := v_all || format('SELECT e.ev_partition, e.ev_time FROM %s e', pgque.event_table(v_queue.queue_id, v_n));
    END LOOP;
    -- retained events per partition: count, oldest, newest
    EXECUTE format('SELECT coalesce(jsonb_object_agg(x.p, jsonb_build_array(x.n, x.lo, x.hi)), ''{}'')
                      FROM (SELECT a.ev_partition AS p, count(*) AS n, min(a.ev_time) AS lo, max(a.ev_time) AS hi
                              FROM (%s) a GROUP BY a.ev_partition) x', array_to_string(v_all, ' UNION ALL '))
       INTO v_ev;
    -- events under a live lease per partition (the most of any group)
    EXECUTE format($sql$
        SELECT coalesce(jsonb_object_agg(y.p, y.n), '{}')
          FROM (SELECT l.gc_partition AS p, max(x.n) AS n
                  FROM pgque.group_cursor l
                 CROSS JOIN LATERAL (SELECT count(*) AS n FROM (%s) r
                                      WHERE (r.ev_txid, r.ev_id) <= (l.gc_end_txid, l.gc_lease_end)) x
                 WHERE l.gc_queue = $1 AND l.gc_lease IS NOT NULL AND l.gc_lease_until > now()
                 GROUP BY l.gc_partition) y
        $sql$, pgque.group_range_sql(v_queue.queue_id, v_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos',
                                     'l.gc_end_txid', NULL, '-l.gc_group', 'l.gc_from'))
       INTO v_lease USING v_queue.queue_id;
    -- pending per partition of the worst group: named groups, else queue mode
    v_groups := ARRAY(SELECT g.grp_name FROM pgque.group_subscription gs
                        JOIN pgque.broker_group g ON g.grp_id = gs.gs_group
                       WHERE gs.gs_queue = v_queue.queue_id AND g.grp_name <> pgque.queue_mode_group());
    IF cardinality(v_groups) = 0 THEN
        v_groups := ARRAY[pgque.queue_mode_group()];
    END IF;
    SELECT coalesce(jsonb_object_agg(d.partition_uuid, d.pending), '{}')
      INTO v_pend
      FROM (SELECT dp.partition_uuid, max(dp.pending) AS pending
              FROM unnest(v_groups) g(name) CROSS JOIN LATERAL pgque.queue_depth(i_queue_name, g.name) dp
             GROUP BY dp.partition_uuid) d;

    WITH per AS (
        SELECT p.part_uuid, p.part_name,
               coalesce((v_ev -> p.part_id::text ->> 0)::bigint, 0) AS total,
               coalesce((v_pend ->> p.part_uuid::text)::bigint, 0) AS pending,
               coalesce((v_lease ->> p.part_id::text)::bigint, 0) AS processing,
               (SELECT count(*) FROM pgque.group_dead_letter d
                 WHERE d.gdl_queue = v_queue.queue_id AND d.gdl_partition = p.part_id) AS dead_letter,
               (v_ev -> p.part_id::text ->> 1)::timestamptz AS oldest,
               (v_ev -> p.part_id::text ->> 2)::timestamptz AS newest
          FROM pgque.partition p WHERE p.part_queue = v_queue.queue_id
    ), fin AS (
        SELECT per.*, least(per.processing, per.pending) AS proc,
               greatest(per.total - per.pending - per.dead_letter, 0) AS completed
          FROM per
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', f.part_uuid, 'name', f.part_name, 'createdAt', NULL,
               'stats', jsonb_build_object('total', f.total, 'pending', f.pending, 'processing', f.proc,
                                           'completed', f.completed, 'failed', NULL, 'deadLetter', f.dead_letter),
               'oldestMessage', to_char(f.oldest AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
               'newestMessage', to_char(f.newest AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
               ORDER BY f.part_name), '[]'),
           jsonb_build_object('total', coalesce(sum(f.total), 0), 'pending', coalesce(sum(f.pending), 0),
                              'processing', coalesce(sum(f.proc), 0), 'completed', coalesce(sum(f.completed), 0),
                              'failed', NULL, 'deadLetter', coalesce(sum(f.dead_letter), 0))
      INTO v_parts, v_totals
      FROM fin f;

    RETURN jsonb_build_object(
        'id', v_queue.queue_id, 'name', v_queue.queue_name,
        'namespace', v_queue.queue_options ->> 'namespace', 'task', v_queue.queue_options ->> 'task',
        'createdAt', to_char(v_queue.queue_created AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'partitions', v_parts, 'totals', v_totals,
        'options', pgque.broker_options(v_queue.queue_options),
        'notEnforced', to_jsonb(pgque.options_not_enforced(v_queue.queue_options)));
END;
$$;
