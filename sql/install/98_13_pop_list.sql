-- pgque.pop_list(i_queue, i_group, i_partitions, i_batch, i_max_partitions,
-- i_lease_seconds, i_auto_ack, i_mode, i_from): the claim core over a list of
-- candidate partitions (ids, in preference order), in ONE set-based
-- statement: lock the free cursors FOR UPDATE SKIP LOCKED, read their
-- pending events, take up to i_batch messages from at most
-- i_max_partitions partitions (in candidate order), lease them (or, with
-- i_auto_ack, move the cursor past them) in one UPDATE.
-- A cursor serves its open range (lo, hi] while it has events after its
-- position, else the next range (hi, latest tick]; events of a range in
-- (ev_txid, ev_id) order. At most i_batch + 1 events are read per range.
-- delayedProcessing D: only events created at least D ago are taken (a
-- prefix: an unripe event stops the batch). windowBuffer W: a partition
-- whose newest pending event is younger than W is not taken.
-- The group is subscribed (i_mode 'new' / 'all', i_from: from a time) and
-- missing cursors seeded on first contact (group_subscribe, group_seed).
-- i_lease_seconds NULL: the queue's leaseTime (default 300).
-- Returns: one verdict row per evaluated candidate (message_id NULL):
--   'took' (drained: nothing pending remains; until: lease expiry),
--   'empty' (nothing pending for this group),
--   'leased' (has or may have work that cannot be taken now; until: when
--     to look again: the live lease's expiry, the delay or window end, or
--     now + 100 ms when a concurrent claim holds the row - never 'empty');
-- candidates after the budget was spent get no verdict; then one row per
-- message (verdict NULL) in candidate then event order.
-- Locks: the candidates' cursor rows (FOR UPDATE SKIP LOCKED), as
-- group_seed on first contact. Writes: group_cursor (one UPDATE).
-- Called by: the broker (pop), pop_any, pop_partition, the hot-list.
CREATE OR REPLACE FUNCTION pgque.pop_list(i_queue text, i_group text, i_partitions int[], i_batch int,
                                          i_max_partitions int DEFAULT 1, i_lease_seconds int DEFAULT NULL,
                                          i_auto_ack boolean DEFAULT false, i_mode text DEFAULT 'new',
                                          i_from timestamptz DEFAULT NULL)
RETURNS TABLE (partition_id int, partition_uuid uuid, partition_name text, verdict text, drained boolean,
               until timestamptz, lease_id uuid, message_id uuid, transaction_id text, payload text,
               created_at timestamptz, delivery_attempt int, ev_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue  pgque.queue := pgque.find_queue(i_queue);
    v_opts   jsonb := pgque.broker_options(v_queue.queue_options);
    v_group  int;
    v_tick   bigint;
    v_snap   pg_snapshot;
    v_tables int[];
    v_lease  interval;
    v_window int := (v_opts ->> 'windowBuffer')::int;
BEGIN
    IF i_partitions IS NULL OR i_batch IS NULL OR i_batch < 1 OR i_max_partitions IS NULL OR i_max_partitions < 1
       OR i_lease_seconds < 1 THEN
        RAISE EXCEPTION 'pgque: pop_list needs candidate partitions, batch >= 1, max partitions >= 1, lease seconds >= 1 (got %, %, %, %)',
            coalesce(cardinality(i_partitions)::text, 'NULL'), coalesce(i_batch::text, 'NULL'),
            coalesce(i_max_partitions::text, 'NULL'), coalesce(i_lease_seconds::text, 'default')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_group := pgque.group_subscribe(v_queue.queue_id, i_group, i_mode, i_from);
    IF cardinality(i_partitions) = 0 THEN
        RETURN;
    END IF;
    PERFORM pgque.group_seed(v_queue.queue_id, v_group, i_partitions);
    SELECT t.tick_id, t.tick_snapshot INTO v_tick, v_snap
      FROM pgque.tick t WHERE t.tick_queue = v_queue.queue_id ORDER BY t.tick_id DESC LIMIT 1;
    v_lease := make_interval(secs => coalesce(i_lease_seconds, (v_opts ->> 'leaseTime')::int));
    -- The current and the previous event table: the oldest one is switched
    -- out only once every cursor has passed it (maint_rotate_tables_step1).
    v_tables := ARRAY[v_queue.queue_cur_table, (v_queue.queue_cur_table + v_queue.queue_ntables - 1) % v_queue.queue_ntables];
    RETURN QUERY EXECUTE format($sql$
        WITH cand AS (
            SELECT c.pid, min(c.ord) AS ord FROM unnest($3::int[]) WITH ORDINALITY c(pid, ord) GROUP BY c.pid
        ), cur AS (
            SELECT gc.gc_partition, gc.gc_lease, gc.gc_lease_until FROM pgque.group_cursor gc
             WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = ANY ($3)
        ), l AS (
            SELECT gc.gc_partition, gc.gc_lo, gc.gc_hi, gc.gc_pos_txid, gc.gc_pos, gc.gc_from
              FROM pgque.group_cursor gc
             WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = ANY ($3)
               AND (gc.gc_lease IS NULL OR gc.gc_lease_until <= now())
               FOR UPDATE SKIP LOCKED
        ), ev AS (
            SELECT l.gc_partition AS pid, true AS in_cur, a.* FROM l CROSS JOIN LATERAL (%1$s) a
            UNION ALL
            SELECT l.gc_partition, false, b.* FROM l CROSS JOIN LATERAL (%2$s) b
        ), ranked AS (
            SELECT ev.*, bool_or(ev.in_cur) OVER (PARTITION BY ev.pid) AS any_cur,
                   count(*) FILTER (WHERE NOT ev.in_cur) OVER (PARTITION BY ev.pid) AS next_n
              FROM ev
        ), chosen AS (
            SELECT r.*, row_number() OVER w AS rn, count(*) OVER (PARTITION BY r.pid) AS cnt,
                   bool_and($9::interval = interval '0' OR r.ev_time <= now() - $9::interval) OVER w AS ripe
              FROM ranked r WHERE r.in_cur = r.any_cur
            WINDOW w AS (PARTITION BY r.pid ORDER BY r.ev_txid, r.ev_id)
        ), per AS (
            SELECT l.gc_partition AS pid, c.ord, coalesce(s.ripe_n, 0) AS ripe_n, coalesce(s.cnt, 0) AS cnt,
                   coalesce(s.next_n, 0) AS next_n, s.first_unripe, coalesce(s.any_cur, true) AS any_cur, nw.newest,
                   coalesce(s.ripe_n, 0) > 0 AND (nw.newest IS NULL OR nw.newest <= now() - $10::interval) AS can_take
              FROM l JOIN cand c ON c.pid = l.gc_partition
              LEFT JOIN (SELECT ch.pid, count(*) FILTER (WHERE ch.ripe) AS ripe_n, max(ch.cnt) AS cnt,
                                max(ch.next_n) AS next_n, min(ch.ev_time) FILTER (WHERE NOT ch.ripe) AS first_unripe,
                                bool_or(ch.any_cur) AS any_cur
                           FROM chosen ch GROUP BY ch.pid) s ON s.pid = l.gc_partition
              LEFT JOIN LATERAL (SELECT max(w.ev_time) AS newest FROM (%3$s) w
                                  WHERE $10::interval > interval '0' AND s.cnt > 0) nw ON true
        ), alloc AS (
            SELECT p.*, count(*) FILTER (WHERE p.can_take) OVER (ORDER BY p.ord) AS take_rank,
                   coalesce(sum(p.ripe_n) FILTER (WHERE p.can_take)
                            OVER (ORDER BY p.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before_n
              FROM per p
        ), takes AS (
            SELECT a.*, least(a.ripe_n, $4 - a.before_n) AS n
              FROM alloc a WHERE a.can_take AND a.take_rank <= $5 AND a.before_n < $4
        ), served AS (
            SELECT ch.* FROM chosen ch JOIN takes t ON t.pid = ch.pid WHERE ch.rn <= t.n
        ), last AS (
            SELECT DISTINCT ON (s.pid) s.pid, s.ev_txid, s.ev_id FROM served s ORDER BY s.pid, s.ev_txid DESC, s.ev_id DESC
        ), upd AS (
            UPDATE pgque.group_cursor gc
               SET gc_lo = CASE WHEN t.any_cur THEN gc.gc_lo ELSE gc.gc_hi END,
                   gc_hi = CASE WHEN t.any_cur THEN gc.gc_hi ELSE $8 END,
                   gc_tick = CASE WHEN t.any_cur THEN gc.gc_tick ELSE $7 END,
                   gc_pos_txid = CASE WHEN $6 THEN lt.ev_txid WHEN t.any_cur THEN gc.gc_pos_txid END,
                   gc_pos = CASE WHEN $6 THEN lt.ev_id WHEN t.any_cur THEN gc.gc_pos END,
                   gc_lease = CASE WHEN $6 THEN NULL ELSE $11 END,
                   gc_lease_until = CASE WHEN $6 THEN NULL ELSE now() + $12::interval END,
                   gc_end_txid = CASE WHEN $6 THEN NULL ELSE lt.ev_txid END,
                   gc_lease_end = CASE WHEN $6 THEN NULL ELSE lt.ev_id END,
                   gc_attempts = CASE WHEN $6 THEN 0 WHEN t.any_cur THEN gc.gc_attempts + 1 ELSE 1 END,
                   gc_fail_ev = CASE WHEN t.any_cur AND NOT $6 THEN gc.gc_fail_ev END,
                   gc_fails = CASE WHEN t.any_cur AND NOT $6 THEN gc.gc_fails ELSE 0 END,
                   gc_active = now()
              FROM takes t JOIN last lt ON lt.pid = t.pid
             WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = t.pid
            RETURNING gc.gc_partition, gc.gc_attempts, gc.gc_lease_until
        ), spent AS (
            SELECT coalesce((SELECT count(*) >= $5 OR sum(n) >= $4 FROM takes), false) AS spent,
                   (SELECT max(ord) FROM takes) AS last_ord
        ), verdicts AS (
            SELECT c.pid, c.ord,
                   CASE WHEN t.pid IS NOT NULL THEN 'took'
                        WHEN p.pid IS NULL AND cu.gc_partition IS NULL THEN 'empty'
                        WHEN p.pid IS NULL THEN 'leased'
                        WHEN p.cnt = 0 THEN 'empty'
                        ELSE 'leased' END AS verdict,
                   CASE WHEN t.pid IS NOT NULL THEN t.n = p.cnt AND p.cnt <= $4 AND (NOT p.any_cur OR p.next_n = 0) END AS drained,
                   CASE WHEN t.pid IS NOT NULL THEN u.gc_lease_until
                        WHEN p.pid IS NULL AND cu.gc_partition IS NULL THEN NULL
                        WHEN p.pid IS NULL THEN CASE WHEN cu.gc_lease IS NOT NULL AND cu.gc_lease_until > now()
                                                     THEN cu.gc_lease_until ELSE now() + interval '100 milliseconds' END
                        WHEN p.cnt = 0 THEN NULL
                        WHEN p.ripe_n > 0 THEN p.newest + $10::interval
                        ELSE p.first_unripe + $9::interval END AS until
              FROM cand c
              LEFT JOIN per p ON p.pid = c.pid
              LEFT JOIN takes t ON t.pid = c.pid
              LEFT JOIN upd u ON u.gc_partition = c.pid
              LEFT JOIN cur cu ON cu.gc_partition = c.pid
              CROSS JOIN spent sp
             WHERE NOT sp.spent OR c.ord <= sp.last_ord
        )
        SELECT o.pid, o.part_uuid, o.part_name, o.verdict, o.drained, o.until, o.lease_id, o.message_id,
               o.transaction_id, o.payload, o.created_at, o.delivery_attempt, o.ev_id
          FROM (
            SELECT v.pid, pt.part_uuid, pt.part_name, v.verdict, v.drained, v.until,
                   CASE WHEN v.verdict = 'took' AND NOT $6 THEN $11 END AS lease_id,
                   NULL::uuid AS message_id, NULL::text AS transaction_id, NULL::text AS payload,
                   NULL::timestamptz AS created_at, NULL::int AS delivery_attempt, NULL::bigint AS ev_id,
                   0 AS k, v.ord, 0::bigint AS rn
              FROM verdicts v LEFT JOIN pgque.partition pt ON pt.part_queue = $1 AND pt.part_id = v.pid
            UNION ALL
            SELECT s.pid, pt.part_uuid, pt.part_name, NULL, NULL, u.gc_lease_until, CASE WHEN NOT $6 THEN $11 END,
                   pgque.message_uuid($1, s.ev_id, s.ev_time),
                   coalesce(s.ev_extra1, pgque.message_uuid($1, s.ev_id, s.ev_time)::text),
                   s.ev_data, s.ev_time, greatest(u.gc_attempts, 1), s.ev_id,
                   1, c.ord, s.rn
              FROM served s
              JOIN upd u ON u.gc_partition = s.pid
              JOIN cand c ON c.pid = s.pid
              JOIN pgque.partition pt ON pt.part_queue = $1 AND pt.part_id = s.pid) o
         ORDER BY o.k, o.ord, o.rn
        $sql$,
        pgque.group_range_sql(v_queue.queue_id, v_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos', NULL,
                              '$4 + 1', '-$2', 'l.gc_from'),
        pgque.group_range_sql(v_queue.queue_id, v_tables, 'l.gc_hi', '$8', NULL, NULL, NULL,
                              '$4 + 1', '-$2', 'l.gc_from'),
        pgque.group_range_sql(v_queue.queue_id, v_tables, 'l.gc_lo', '$8', 'l.gc_pos_txid', 'l.gc_pos', NULL,
                              NULL, '-$2', 'l.gc_from'))
    USING v_queue.queue_id, v_group, i_partitions, i_batch, i_max_partitions, coalesce(i_auto_ack, false),
          v_tick, v_snap, make_interval(secs => (v_opts ->> 'delayedProcessing')::int),
          make_interval(secs => v_window), gen_random_uuid(), v_lease;
END;
$$;
