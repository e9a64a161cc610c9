-- pgque.pop_list(i_queue, i_group, i_partitions, i_batch, i_max_partitions,
-- i_lease_seconds, i_auto_ack, i_mode, i_from): the claim core over a list of
-- candidate partitions (ids, in preference order), in ONE set-based
-- statement: lock the free cursors FOR UPDATE SKIP LOCKED, read their
-- pending events, take up to i_batch messages from at most
-- i_max_partitions partitions (in candidate order), lease them (or, with
-- i_auto_ack, move the cursor past them) in one UPDATE.
-- A cursor serves its open range (lo, hi] while it has events after gc_pos,
-- else the next range (hi, latest tick]; events of a range by ev_id.
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
-- message (verdict NULL) in candidate then ev_id order.
-- Locks: the candidates' cursor rows (FOR UPDATE SKIP LOCKED), as
-- group_seed on first contact. Writes: group_cursor (one UPDATE).
-- Called by: the broker (pop), pop (wildcard / by name), the hot-list.
CREATE OR REPLACE FUNCTION pgque.pop_list(i_queue text, i_group text, i_partitions int[], i_batch int,
                                          i_max_partitions int DEFAULT 1, i_lease_seconds int DEFAULT NULL,
                                          i_auto_ack boolean DEFAULT false, i_mode text DEFAULT 'new',
                                          i_from timestamptz DEFAULT NULL)
RETURNS TABLE (partition_id int, partition_uuid uuid, partition_name text, verdict text, drained boolean,
               until timestamptz, lease_id uuid, message_id uuid, transaction_id text, payload text,
               created_at timestamptz, delivery_attempt int, ev_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pgque, pg_catalog
AS $$
DECLARE
    v_queue  pgque.queue := pgque.find_queue(i_queue);
    v_opts   jsonb := pgque.broker_options(v_queue.queue_options);
    v_group  int;
    v_tick   bigint;
    v_snap   pg_snapshot;
    v_prev   int;
    v_src    text;
    v_lease  interval;
    c_cols   constant text := 'e.ev_id, e.ev_time, e.ev_txid, e.ev_data, e.ev_extra1 FROM %s e '
        'WHERE e.ev_partition = l.gc_partition '
        'AND ((e.ev_txid >= pg_snapshot_xmax(l.gc_lo) AND e.ev_txid < pg_snapshot_xmax($8)) OR e.ev_txid = ANY (l.lo_xip)) '
        'AND pg_visible_in_snapshot(e.ev_txid, $8) AND NOT pg_visible_in_snapshot(e.ev_txid, l.gc_lo) '
        'AND (e.ev_owner IS NULL OR e.ev_owner = -$2) AND (l.gc_from IS NULL OR e.ev_time >= l.gc_from)';
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
    v_prev := (v_queue.queue_cur_table + v_queue.queue_ntables - 1) % v_queue.queue_ntables;
    v_src := 'SELECT ' || format(c_cols, pgque.event_table(v_queue.queue_id, v_queue.queue_cur_table))
          || ' UNION ALL SELECT ' || format(c_cols, pgque.event_table(v_queue.queue_id, v_prev));
    RETURN QUERY EXECUTE format($sql$
        WITH cand AS (
            SELECT c.pid, min(c.ord) AS ord FROM unnest($3::int[]) WITH ORDINALITY c(pid, ord) GROUP BY c.pid
        ), cur AS (
            SELECT gc.gc_partition, gc.gc_lease, gc.gc_lease_until FROM pgque.group_cursor gc
             WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = ANY ($3)
        ), lk0 AS (
            SELECT gc.gc_partition, gc.gc_lo, gc.gc_hi, gc.gc_pos, gc.gc_from
              FROM pgque.group_cursor gc
             WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = ANY ($3)
               AND (gc.gc_lease IS NULL OR gc.gc_lease_until <= now())
               FOR UPDATE SKIP LOCKED
        ), lk AS (
            SELECT lk0.*, ARRAY(SELECT pg_snapshot_xip(lk0.gc_lo)) AS lo_xip FROM lk0
        ), ev AS (
            SELECT l.gc_partition AS pid, e.ev_id, e.ev_time, e.ev_data, e.ev_extra1,
                   pg_visible_in_snapshot(e.ev_txid, l.gc_hi) AS in_cur
              FROM lk l CROSS JOIN LATERAL (%s) e
             WHERE NOT (pg_visible_in_snapshot(e.ev_txid, l.gc_hi) AND l.gc_pos IS NOT NULL AND e.ev_id <= l.gc_pos)
        ), ranked AS (
            SELECT ev.*, bool_or(ev.in_cur) OVER w AS any_cur, max(ev.ev_time) OVER w AS newest, count(*) OVER w AS pending
              FROM ev WINDOW w AS (PARTITION BY ev.pid)
        ), chosen AS (
            SELECT r.*, row_number() OVER (PARTITION BY r.pid ORDER BY r.ev_id) AS rn,
                   bool_and($9::interval = interval '0' OR r.ev_time <= now() - $9::interval) OVER (PARTITION BY r.pid ORDER BY r.ev_id) AS ripe
              FROM ranked r WHERE r.in_cur = r.any_cur
        ), per AS (
            SELECT l.gc_partition AS pid, c.ord, coalesce(s.ripe_n, 0) AS ripe_n, coalesce(s.pending, 0) AS pending,
                   s.newest, s.first_unripe, coalesce(s.any_cur, true) AS any_cur,
                   coalesce(s.ripe_n, 0) > 0 AND ($10::interval = interval '0' OR s.newest <= now() - $10::interval) AS can_take
              FROM lk l JOIN cand c ON c.pid = l.gc_partition
              LEFT JOIN (SELECT ch.pid, count(*) FILTER (WHERE ch.ripe) AS ripe_n, max(ch.pending) AS pending,
                                max(ch.newest) AS newest, min(ch.ev_time) FILTER (WHERE NOT ch.ripe) AS first_unripe,
                                bool_or(ch.any_cur) AS any_cur
                           FROM chosen ch GROUP BY ch.pid) s ON s.pid = l.gc_partition
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
        ), upd AS (
            UPDATE pgque.group_cursor gc
               SET gc_lo = CASE WHEN t.any_cur THEN gc.gc_lo ELSE gc.gc_hi END,
                   gc_hi = CASE WHEN t.any_cur THEN gc.gc_hi ELSE $8 END,
                   gc_tick = CASE WHEN t.any_cur THEN gc.gc_tick ELSE $7 END,
                   gc_pos = CASE WHEN $6 THEN t.last_ev WHEN t.any_cur THEN gc.gc_pos END,
                   gc_lease = CASE WHEN $6 THEN NULL ELSE $11 END,
                   gc_lease_until = CASE WHEN $6 THEN NULL ELSE now() + $12::interval END,
                   gc_lease_end = CASE WHEN $6 THEN NULL ELSE t.last_ev END,
                   gc_attempts = CASE WHEN $6 THEN 0 WHEN t.any_cur THEN gc.gc_attempts + 1 ELSE 1 END,
                   gc_fail_ev = CASE WHEN t.any_cur AND NOT $6 THEN gc.gc_fail_ev END,
                   gc_fails = CASE WHEN t.any_cur AND NOT $6 THEN gc.gc_fails ELSE 0 END,
                   gc_active = now()
              FROM (SELECT tk.pid, tk.any_cur, (SELECT max(s.ev_id) FROM served s WHERE s.pid = tk.pid) AS last_ev
                      FROM takes tk) t
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
                        WHEN p.pending = 0 THEN 'empty'
                        ELSE 'leased' END AS verdict,
                   CASE WHEN t.pid IS NOT NULL THEN t.n >= p.pending END AS drained,
                   CASE WHEN t.pid IS NOT NULL THEN u.gc_lease_until
                        WHEN p.pid IS NULL AND cu.gc_partition IS NULL THEN NULL
                        WHEN p.pid IS NULL THEN CASE WHEN cu.gc_lease IS NOT NULL AND cu.gc_lease_until > now()
                                                     THEN cu.gc_lease_until ELSE now() + interval '100 milliseconds' END
                        WHEN p.pending = 0 THEN NULL
                        WHEN p.ripe_n > 0 THEN p.newest + $10::interval
                        ELSE p.first_unripe + $9::interval END AS until,
                   u.gc_attempts
              FROM cand c
              LEFT JOIN per p ON p.pid = c.pid
              LEFT JOIN takes t ON t.pid = c.pid
              LEFT JOIN upd u ON u.gc_partition = c.pid
              LEFT JOIN cur cu ON cu.gc_partition = c.pid
              CROSS JOIN spent sp
             WHERE NOT sp.spent OR c.ord <= sp.last_ord
        )
        SELECT v.pid, pt.part_uuid, pt.part_name, v.verdict, v.drained, v.until,
               CASE WHEN v.verdict = 'took' AND NOT $6 THEN $11 END,
               NULL::uuid, NULL::text, NULL::text, NULL::timestamptz, NULL::int, NULL::bigint
          FROM verdicts v LEFT JOIN pgque.partition pt ON pt.part_queue = $1 AND pt.part_id = v.pid
        UNION ALL
        SELECT s.pid, pt.part_uuid, pt.part_name, NULL, NULL, u.gc_lease_until, CASE WHEN NOT $6 THEN $11 END,
               pgque.message_uuid($1, s.ev_id, s.ev_time),
               coalesce(s.ev_extra1, pgque.message_uuid($1, s.ev_id, s.ev_time)::text),
               s.ev_data, s.ev_time, greatest(u.gc_attempts, 1), s.ev_id
          FROM served s
          JOIN upd u ON u.gc_partition = s.pid
          JOIN pgque.partition pt ON pt.part_queue = $1 AND pt.part_id = s.pid
         ORDER BY 13 NULLS FIRST
        $sql$, v_src)
    USING v_queue.queue_id, v_group, i_partitions, i_batch, i_max_partitions, coalesce(i_auto_ack, false),
          v_tick, v_snap, make_interval(secs => (v_opts ->> 'delayedProcessing')::int),
          make_interval(secs => (v_opts ->> 'windowBuffer')::int), gen_random_uuid(), v_lease;
END;
$$;
