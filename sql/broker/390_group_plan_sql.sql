-- pgque.group_plan_sql(i_queue_id, i_tables): the broker's per-queue read
-- statements whose text names event tables, as bodies of generated
-- functions (pgque.group_plans creates them, one set per current table):
-- each statement is the one its entry point used to build and EXECUTE on
-- every call, with the event tables i_tables (the current and the previous
-- one) fixed. Static SQL in a PL/pgSQL function is planned once per session
-- and, under plan_cache_mode = force_generic_plan, reused: the planning of
-- these ~15 KB statements was most of a pop's PostgreSQL time. $n are the
-- generated function's (unnamed) parameters, in the order fn_args lists.
-- Returns: one row per statement kind: fn_kind (the generated function's
-- name prefix, pgque.<fn_kind>_q<queue>_t<current table>), fn_args
-- (parameter types), fn_result (RETURNS clause), fn_volatility, fn_body
-- (the PL/pgSQL body). Kinds: pop_list and pop_list_w (pop_list's claim
-- statement without and with the windowBuffer test, not serving events
-- older than the expiry cutoff $13 (queue_expiry), after
-- seeding the candidates' missing cursors: group_seed, called only when one
-- is missing),
-- group_ack (group_ack's read of the leased batches), group_ack_below (which
-- of the other items are done: at or below the position, index probes),
-- group_ack_fast (group_ack's fast path: the lock, the read and the UPDATE of a completed in-order ack of a prefix of
-- the batch, two statements), group_pending (group_pending's probe),
-- group_advance_idle (its UPDATE; returns the rows updated), push_fresh
-- (push's INSERT, writes unlike the others: one INSERT ... RETURNING of
-- items of interned partitions without transactionId into the current
-- table i_tables[1], ev_id from the column's
-- default (the queue's sequence, drawn in input order); arrays of partition
-- ids and payloads, and the queue name; returns push's result rows, idx
-- 0-based in input order), push_dedup (the same with transactionIds: the
-- repeats inside the push, the recorded duplicates inside the window $5,
-- the INSERT of the fresh events and of their dedup rows, one statement;
-- push holds the dedup locks), push_direct (push_fresh's INSERT for the
-- broker to call itself: SECURITY DEFINER, fn_volatility says so; it
-- checks the queue row and the partition ids, and inserts nothing when
-- the caller's cached route is stale), ack_direct (group_ack_fast for the
-- broker to call itself, likewise: nothing when the route is stale).
-- Cursor rows
-- are looked up per named partition (a LATERAL probe of (queue, group,
-- partition) each), never by scanning the group's cursors.
-- Locks: none. Writes: nothing (it only builds texts). Called by: group_plans.
CREATE OR REPLACE FUNCTION pgque.group_plan_sql(i_queue_id int, i_tables int[])
RETURNS TABLE (fn_kind text, fn_args text, fn_result text, fn_volatility text, fn_body text)
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_kind text;
BEGIN
    -- pop_list: its claim statement for a queue without windowBuffer;
    -- pop_list_w: the same with the windowBuffer test (the newest pending
    -- event of each partition: a third range read). Apart, a pop of a
    -- queue without a window does not set up (ExecutorStart) the read it
    -- never runs: a third of the statement's scans.
    -- $8: the next range's end, a snapshot not later than the claim
    -- statement's own (pop_list passes pg_current_snapshot(), taken just
    -- before: what it sees, the statement sees); $7 its tick, NULL then
    -- (gc_tick is informational).
    -- $13: the expiry cutoff (pop_list: now() - queue_expiry; NULL when
    -- the queue has none): older events are not served, as if their
    -- gc_from were later. One NULL test per event read when off.
    FOREACH v_kind IN ARRAY ARRAY['pop_list', 'pop_list_w'] LOOP
    fn_kind := v_kind;
    fn_args := 'int, int, int[], int, int, boolean, bigint, pg_snapshot, interval, interval, uuid, interval, timestamptz';
    fn_result := 'TABLE (partition_id int, partition_uuid uuid, partition_name text, verdict text, drained boolean, '
                 'until timestamptz, lease_id uuid, message_id uuid, transaction_id text, payload text, '
                 'created_at timestamptz, delivery_attempt int, ev_id bigint)';
    fn_volatility := 'VOLATILE';
    -- Seeding first, only when some candidate lacks its cursor (a probe of
    -- (queue, group, partition) per candidate, planned once here: as
    -- pop_list's own statement it was planned anew on every call, a custom
    -- plan per candidate array, 0.27 ms of a 1.9 ms pop).
    fn_body := $sql$BEGIN
        IF EXISTS (SELECT 1 FROM unnest($3::int[]) p
                     JOIN pgque.partition pt ON pt.part_queue = $1 AND pt.part_id = p
                    WHERE NOT EXISTS (SELECT 1 FROM pgque.group_cursor gc
                                       WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = p
                                      OFFSET 0)) THEN
            PERFORM pgque.group_seed($1, $2, $3);
        END IF;
        RETURN QUERY $sql$ || format($sql$
        WITH cand AS (
            SELECT c.pid, min(c.ord) AS ord FROM unnest($3::int[]) WITH ORDINALITY c(pid, ord) GROUP BY c.pid
        ), cur AS (
            -- each candidate's cursor as committed (no lock): free = no
            -- live lease; work = free and an event pending (either range,
            -- one probe each, LIMIT 1). Only work rows are locked below: a
            -- pop that finds nothing pending writes nothing (a row lock
            -- assigns a transaction id and writes WAL, a commit record
            -- then flushed).
            SELECT l.gc_partition, l.gc_lease, l.gc_lease_until, f.free,
                   f.free AND (EXISTS (%4$s) OR EXISTS (%5$s)) AS work
              FROM cand c CROSS JOIN LATERAL (
                   SELECT gc.* FROM pgque.group_cursor gc
                    WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = c.pid OFFSET 0) l
             CROSS JOIN LATERAL (SELECT l.gc_lease IS NULL OR l.gc_lease_until <= now() AS free) f
        ), l AS (
            -- the lock re-checks the lease on the newest row version: a claim
            -- committed since is seen; a row a concurrent claim holds is
            -- skipped: 'leased' below, never 'empty'. And the range end: a
            -- claim that committed after this statement's snapshot (the
            -- newest version, locked here) may have closed its range at a
            -- later snapshot; read with this one, an event of a transaction
            -- that committed in between would be invisible here and passed
            -- over for good. Such a row is skipped as well ('leased'): its
            -- hi must be at or before this statement's snapshot - hi's xmax
            -- not above it, and no transaction in flight here visible in hi.
            SELECT gc.gc_partition, gc.gc_lo, gc.gc_hi, gc.gc_pos_txid, gc.gc_pos, gc.gc_from
              FROM cur cu CROSS JOIN LATERAL (
                   SELECT gc.gc_partition, gc.gc_lo, gc.gc_hi, gc.gc_pos_txid, gc.gc_pos, gc.gc_from
                     FROM pgque.group_cursor gc
                    WHERE cu.work AND gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = cu.gc_partition
                      AND (gc.gc_lease IS NULL OR gc.gc_lease_until <= now())
                      AND pg_snapshot_xmax(gc.gc_hi) <= pg_snapshot_xmax(pg_current_snapshot())
                      AND NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()) x
                                       WHERE pg_visible_in_snapshot(x, gc.gc_hi))
                      FOR UPDATE SKIP LOCKED) gc
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
              %3$s
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
            -- (joined through l, whose partitions are the rows locked: the
            -- planner then probes (queue, group, partition); by takes alone
            -- it scanned the group's every cursor - group_cursor is never
            -- analyzed, so (queue, group) looks like one row)
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
              FROM takes t JOIN last lt ON lt.pid = t.pid JOIN l lk ON lk.gc_partition = t.pid
             WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = lk.gc_partition
            RETURNING gc.gc_partition, gc.gc_attempts, gc.gc_lease_until
        ), spent AS (
            SELECT coalesce((SELECT count(*) >= $5 OR sum(n) >= $4 FROM takes), false) AS spent,
                   (SELECT max(ord) FROM takes) AS last_ord
        ), verdicts AS (
            SELECT c.pid, c.ord,
                   CASE WHEN t.pid IS NOT NULL THEN 'took'
                        WHEN p.pid IS NULL AND (cu.gc_partition IS NULL OR (cu.free AND NOT cu.work)) THEN 'empty'
                        WHEN p.pid IS NULL THEN 'leased'
                        WHEN p.cnt = 0 THEN 'empty'
                        ELSE 'leased' END AS verdict,
                   CASE WHEN t.pid IS NOT NULL THEN t.n = p.cnt AND p.cnt <= $4 AND (NOT p.any_cur OR p.next_n = 0) END AS drained,
                   CASE WHEN t.pid IS NOT NULL THEN u.gc_lease_until
                        WHEN p.pid IS NULL AND (cu.gc_partition IS NULL OR (cu.free AND NOT cu.work)) THEN NULL
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
            pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos', NULL,
            '$4 + 1', '-$2', 'greatest(l.gc_from, $13)'),
            pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_hi', '$8', NULL, NULL, NULL,
            '$4 + 1', '-$2', 'greatest(l.gc_from, $13)'),
            CASE WHEN v_kind = 'pop_list_w' THEN
                format('LEFT JOIN LATERAL (SELECT max(w.ev_time) AS newest FROM (%s) w
                                  WHERE $10::interval > interval ''0'' AND s.cnt > 0) nw ON true',
                       pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_lo', '$8', 'l.gc_pos_txid', 'l.gc_pos', NULL,
                                             NULL, '-$2', 'greatest(l.gc_from, $13)'))
            ELSE 'CROSS JOIN (SELECT NULL::timestamptz AS newest) nw' END,
            pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos', NULL,
            '1', '-$2', 'greatest(l.gc_from, $13)'),
            pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_hi', '$8', NULL, NULL, NULL,
            '1', '-$2', 'greatest(l.gc_from, $13)')) || '; END';
    RETURN NEXT;
    END LOOP;

    -- pop_one: pop_list's claim of ONE candidate partition ($3 = ARRAY[p])
    -- of a queue without windowBuffer (the hot-list's usual check-out, a
    -- pop of a named partition), as a few small statements instead of the
    -- set-based one: same parameters, same rows, same writes (the general
    -- form's verdict rules restated for one partition; sql/pop_one_test.go
    -- compares the two over a table of cases). Steps: the partition (not
    -- the queue's: 'empty', no uuid/name); its cursor as committed (seeded
    -- when missing); a live lease: 'leased' until its expiry; nothing
    -- pending in (lo, hi] after the position nor in (hi, $8]: 'empty' -
    -- this path reads three index entries and locks and writes nothing;
    -- the lock (FOR UPDATE SKIP LOCKED, rechecking the lease and that hi is
    -- at or before this statement's snapshot, as the general form): not
    -- got: 'leased' until now + 100 ms; the open range's events (at most
    -- $4 + 1) or, when none, the next range's; the delay's ripe prefix; the
    -- UPDATE; the verdict row, then the messages. Each later statement's
    -- snapshot is newer than the lock's and than $8, so it sees every
    -- transaction of both ranges.
    fn_kind := 'pop_one';
    fn_args := 'int, int, int[], int, int, boolean, bigint, pg_snapshot, interval, interval, uuid, interval, timestamptz';
    fn_result := 'TABLE (partition_id int, partition_uuid uuid, partition_name text, verdict text, drained boolean, '
                 'until timestamptz, lease_id uuid, message_id uuid, transaction_id text, payload text, '
                 'created_at timestamptz, delivery_attempt int, ev_id bigint)';
    fn_volatility := 'VOLATILE';
    fn_body := format($sql$
DECLARE
    v_pid      int := $3[1];
    v_uuid     uuid;
    v_name     text;
    v_lease    uuid;
    v_until    timestamptz;
    v_lo       pg_snapshot;
    v_hi       pg_snapshot;
    v_pos_txid xid8;
    v_pos      bigint;
    v_from     timestamptz;
    v_cur      boolean;
    v_id       bigint[];
    v_txid     xid8[];
    v_time     timestamptz[];
    v_data     text[];
    v_extra    text[];
    v_cnt      int;
    v_ripe     int;
    v_unripe   timestamptz;
    v_n        int;
    v_att      int;
    v_tomb     boolean;
BEGIN
    SELECT pt.part_uuid, pt.part_name INTO v_uuid, v_name
      FROM pgque.partition pt WHERE pt.part_queue = $1 AND pt.part_id = v_pid;
    partition_id := v_pid;
    verdict := 'empty';
    IF NOT FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    partition_uuid := v_uuid;
    partition_name := v_name;
    SELECT gc.gc_lease, gc.gc_lease_until, gc.gc_lo, gc.gc_hi, gc.gc_pos_txid, gc.gc_pos, gc.gc_from
      INTO v_lease, v_until, v_lo, v_hi, v_pos_txid, v_pos, v_from
      FROM pgque.group_cursor gc WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = v_pid;
    IF NOT FOUND THEN
        PERFORM pgque.group_seed($1, $2, $3);
        SELECT gc.gc_lease, gc.gc_lease_until, gc.gc_lo, gc.gc_hi, gc.gc_pos_txid, gc.gc_pos, gc.gc_from
          INTO v_lease, v_until, v_lo, v_hi, v_pos_txid, v_pos, v_from
          FROM pgque.group_cursor gc WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = v_pid;
        IF NOT FOUND THEN
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    IF NOT coalesce(v_lease IS NULL OR v_until <= now(), false) THEN
        verdict := 'leased';
        until := CASE WHEN v_lease IS NOT NULL AND v_until > now() THEN v_until ELSE now() + interval '100 milliseconds' END;
        RETURN NEXT;
        RETURN;
    END IF;
    -- pending work: first without the deleted-message test (%5$s, %6$s:
    -- the same reads without it; their plans are a third the size), then,
    -- only when that finds an event and the queue has deleted messages,
    -- with it
    v_tomb := EXISTS (SELECT 1 FROM pgque.message_tombstone mt WHERE mt.mt_queue = $1);
    IF NOT (EXISTS (%5$s) OR EXISTS (%6$s))
       OR (v_tomb AND NOT (EXISTS (%1$s) OR EXISTS (%2$s))) THEN
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT gc.gc_lo, gc.gc_hi, gc.gc_pos_txid, gc.gc_pos, gc.gc_from INTO v_lo, v_hi, v_pos_txid, v_pos, v_from
      FROM pgque.group_cursor gc
     WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = v_pid
       AND (gc.gc_lease IS NULL OR gc.gc_lease_until <= now())
       AND pg_snapshot_xmax(gc.gc_hi) <= pg_snapshot_xmax(pg_current_snapshot())
       AND NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()) x WHERE pg_visible_in_snapshot(x, gc.gc_hi))
       FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        verdict := 'leased';
        until := now() + interval '100 milliseconds';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT array_agg(x.ev_id ORDER BY x.ev_txid, x.ev_id), array_agg(x.ev_txid ORDER BY x.ev_txid, x.ev_id),
           array_agg(x.ev_time ORDER BY x.ev_txid, x.ev_id), array_agg(x.ev_data ORDER BY x.ev_txid, x.ev_id),
           array_agg(x.ev_extra1 ORDER BY x.ev_txid, x.ev_id)
      INTO v_id, v_txid, v_time, v_data, v_extra
      FROM (%3$s) x;
    v_cur := v_id IS NOT NULL;
    IF NOT v_cur THEN
        SELECT array_agg(x.ev_id ORDER BY x.ev_txid, x.ev_id), array_agg(x.ev_txid ORDER BY x.ev_txid, x.ev_id),
               array_agg(x.ev_time ORDER BY x.ev_txid, x.ev_id), array_agg(x.ev_data ORDER BY x.ev_txid, x.ev_id),
               array_agg(x.ev_extra1 ORDER BY x.ev_txid, x.ev_id)
          INTO v_id, v_txid, v_time, v_data, v_extra
          FROM (%4$s) x;
    END IF;
    v_cnt := coalesce(cardinality(v_id), 0);
    IF v_cnt = 0 THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- delayedProcessing: the ripe prefix (an unripe event stops the batch);
    -- v_unripe: the earliest creation time from the first unripe event on
    v_ripe := v_cnt;
    IF $9 <> interval '0' THEN
        SELECT min(u.o) - 1 INTO v_ripe FROM unnest(v_time) WITH ORDINALITY u(t, o) WHERE u.t > now() - $9;
        IF v_ripe IS NULL THEN
            v_ripe := v_cnt;
        ELSE
            v_unripe := (SELECT min(u.t) FROM unnest(v_time[v_ripe + 1:]) u(t));
        END IF;
    END IF;
    IF v_ripe = 0 THEN
        verdict := 'leased';
        until := v_unripe + $9;
        RETURN NEXT;
        RETURN;
    END IF;
    v_n := least(v_ripe, $4);
    UPDATE pgque.group_cursor gc
       SET gc_lo = CASE WHEN v_cur THEN gc.gc_lo ELSE gc.gc_hi END,
           gc_hi = CASE WHEN v_cur THEN gc.gc_hi ELSE $8 END,
           gc_tick = CASE WHEN v_cur THEN gc.gc_tick ELSE $7 END,
           gc_pos_txid = CASE WHEN $6 THEN v_txid[v_n] WHEN v_cur THEN gc.gc_pos_txid END,
           gc_pos = CASE WHEN $6 THEN v_id[v_n] WHEN v_cur THEN gc.gc_pos END,
           gc_lease = CASE WHEN $6 THEN NULL ELSE $11 END,
           gc_lease_until = CASE WHEN $6 THEN NULL ELSE now() + $12::interval END,
           gc_end_txid = CASE WHEN $6 THEN NULL ELSE v_txid[v_n] END,
           gc_lease_end = CASE WHEN $6 THEN NULL ELSE v_id[v_n] END,
           gc_attempts = CASE WHEN $6 THEN 0 WHEN v_cur THEN gc.gc_attempts + 1 ELSE 1 END,
           gc_fail_ev = CASE WHEN v_cur AND NOT $6 THEN gc.gc_fail_ev END,
           gc_fails = CASE WHEN v_cur AND NOT $6 THEN gc.gc_fails ELSE 0 END,
           gc_active = now()
     WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = v_pid
    RETURNING gc.gc_attempts, gc.gc_lease_until INTO v_att, v_until;
    verdict := 'took';
    -- drained: every event read was taken, and (from the open range) the
    -- next range has none
    drained := v_n = v_cnt AND v_cnt <= $4;
    IF drained AND v_cur THEN
        drained := NOT EXISTS (%6$s) OR (v_tomb AND NOT EXISTS (%2$s));
    END IF;
    until := v_until;
    lease_id := CASE WHEN NOT $6 THEN $11 END;
    RETURN NEXT;
    RETURN QUERY
        SELECT v_pid, v_uuid, v_name, NULL::text, NULL::boolean, v_until, CASE WHEN NOT $6 THEN $11 END,
               pgque.message_uuid($1, u.i, u.t), coalesce(u.x, pgque.message_uuid($1, u.i, u.t)::text),
               u.d, u.t, greatest(v_att, 1), u.i
          FROM unnest(v_id[1:v_n], v_time[1:v_n], v_data[1:v_n], v_extra[1:v_n]) WITH ORDINALITY u(i, t, d, x, o)
         ORDER BY u.o;
END
$sql$,
            -- (the partition: v_pid; in an EXISTS, the planner drops the
            -- outer ORDER BY ... LIMIT 1 of a range read: no sort)
            replace(pgque.group_range_sql(i_queue_id, i_tables, 'v_lo', 'v_hi', 'v_pos_txid', 'v_pos', NULL,
                    '1', '-$2', 'greatest(v_from, $13)'), 'l.gc_partition', 'v_pid'),
            replace(pgque.group_range_sql(i_queue_id, i_tables, 'v_hi', '$8', NULL, NULL, NULL,
                    '1', '-$2', 'greatest(v_from, $13)'), 'l.gc_partition', 'v_pid'),
            replace(pgque.group_range_sql(i_queue_id, i_tables, 'v_lo', 'v_hi', 'v_pos_txid', 'v_pos', NULL,
                    '$4 + 1', '-$2', 'greatest(v_from, $13)'), 'l.gc_partition', 'v_pid'),
            replace(pgque.group_range_sql(i_queue_id, i_tables, 'v_hi', '$8', NULL, NULL, NULL,
                    '$4 + 1', '-$2', 'greatest(v_from, $13)'), 'l.gc_partition', 'v_pid'),
            -- without the deleted-message test: a non-NULL end bound text
            -- that bounds nothing (NULL::xid8) leaves it out
            replace(pgque.group_range_sql(i_queue_id, i_tables, 'v_lo', 'v_hi', 'v_pos_txid', 'v_pos', 'NULL::xid8',
                    '1', '-$2', 'greatest(v_from, $13)'), 'l.gc_partition', 'v_pid'),
            replace(pgque.group_range_sql(i_queue_id, i_tables, 'v_hi', '$8', NULL, NULL, 'NULL::xid8',
                    '1', '-$2', 'greatest(v_from, $13)'), 'l.gc_partition', 'v_pid'));
    RETURN NEXT;

    fn_kind := 'group_ack';
    fn_args := 'text[], uuid[], int, int';
    fn_result := 'TABLE (i int, ev_id bigint, ev_time timestamptz, ev_txid xid8, ev_data text, pv_txid xid8, pv_id bigint)';
    fn_volatility := 'VOLATILE';
    fn_body := 'BEGIN RETURN QUERY ' || format($sql$
        WITH l AS MATERIALIZED (
            SELECT gc.*
              FROM (SELECT DISTINCT p.part_id FROM pgque.partition p
                     WHERE p.part_queue = $3 AND p.part_uuid = ANY ($2)) k
             CROSS JOIN LATERAL (SELECT gc.* FROM pgque.group_cursor gc
                                  WHERE gc.gc_queue = $3 AND gc.gc_group = $4 AND gc.gc_partition = k.part_id OFFSET 0) gc
             WHERE gc.gc_lease IS NOT NULL AND gc.gc_lease_until > now()
        ), ev AS MATERIALIZED (
            SELECT l.gc_partition AS pid, x.ev_id, x.ev_time, x.ev_txid, x.ev_data,
                   coalesce(x.ev_extra1, pgque.message_uuid($3, x.ev_id, x.ev_time)::text) AS k,
                   lag(x.ev_txid) OVER w AS pv_txid, lag(x.ev_id) OVER w AS pv_id
              FROM l CROSS JOIN LATERAL (%s) x
             WHERE (x.ev_txid, x.ev_id) <= (l.gc_end_txid, l.gc_lease_end)
            WINDOW w AS (PARTITION BY l.gc_partition ORDER BY x.ev_txid, x.ev_id)
        ), it AS MATERIALIZED (
            SELECT u.o::int AS i, u.t AS txn, p.part_id
              FROM unnest($1::text[], $2::uuid[]) WITH ORDINALITY u(t, pu, o)
              JOIN pgque.partition p ON p.part_uuid = u.pu AND p.part_queue = $3
             WHERE u.t IS NOT NULL
        )
        SELECT DISTINCT ON (it.i) it.i, ev.ev_id, ev.ev_time, ev.ev_txid, ev.ev_data, ev.pv_txid, ev.pv_id
          FROM it JOIN ev ON ev.pid = it.part_id AND ev.k = it.txn
         ORDER BY it.i, ev.ev_txid, ev.ev_id
        $sql$,
            pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos',
            'l.gc_end_txid', NULL, '-l.gc_group', 'l.gc_from')) || '; END';
    RETURN NEXT;

    -- group_ack_below: the items not found in the leased batch ($5: the
    -- event ids found, NULL where not) that are done for the group: at or
    -- below the cursor's position anywhere in the retained event tables
    -- (visible in gc_lo, created before gc_from, or at or below the
    -- position inside the open range: message_state's "passed"). O(items):
    -- no range read. An item's event ids come without a table read: a
    -- message id carries its event id (the low 54 bits, message_uuid); a
    -- transactionId (an item its message id did not find) is looked up in
    -- the dedup table (one (dd_queue, dd_partition, dd_txn) probe: the
    -- message ids recorded for it, while its slot is kept). Each event id is one (ev_id) index probe per
    -- event table, the event taken only when its key (transactionId, else
    -- message id) is the item's, on its partition, and the group's to read.
    -- Those tests stay outside the probe (OFFSET 0): pushed into it, the
    -- partition's equality made the (ev_partition, ev_txid, ev_id) index
    -- look as good, and it read the partition's every retained entry.
    fn_kind := 'group_ack_below';
    fn_args := 'text[], uuid[], int, int, bigint[]';
    fn_result := 'TABLE (i int)';
    fn_volatility := 'VOLATILE';
    fn_body := 'BEGIN RETURN QUERY ' || format($sql$
        WITH it AS MATERIALIZED (
            SELECT u.o::int AS i, u.t AS txn, p.part_id
              FROM unnest($1::text[], $2::uuid[], $5::bigint[]) WITH ORDINALITY u(t, pu, e, o)
              JOIN pgque.partition p ON p.part_uuid = u.pu AND p.part_queue = $3
             WHERE u.t IS NOT NULL AND u.e IS NULL
        ), l AS MATERIALIZED (
            SELECT gc.*
              FROM (SELECT DISTINCT it.part_id FROM it) k
             CROSS JOIN LATERAL (SELECT gc.* FROM pgque.group_cursor gc
                                  WHERE gc.gc_queue = $3 AND gc.gc_group = $4 AND gc.gc_partition = k.part_id OFFSET 0) gc
        ), bym AS MATERIALIZED (
            -- by message id: the event id it carries
            SELECT it.i, it.part_id, x.*
              FROM (SELECT it.* FROM it
                     WHERE it.txn ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' OFFSET 0) it
             CROSS JOIN LATERAL (SELECT * FROM (%1$s) y OFFSET 0) x
             WHERE x.ev_partition = it.part_id AND (x.ev_owner IS NULL OR x.ev_owner = -$4)
               AND coalesce(x.ev_extra1, pgque.message_uuid($3, x.ev_id, x.ev_time)::text) = it.txn
        ), byt AS MATERIALIZED (
            -- the others by transactionId: the message ids dedup recorded
            SELECT it.i, it.part_id, x.*
              FROM (SELECT it.* FROM it WHERE NOT EXISTS (SELECT 1 FROM bym b WHERE b.i = it.i) OFFSET 0) it
              JOIN pgque.dedup d ON d.dd_queue = $3 AND d.dd_partition = it.part_id AND d.dd_txn = it.txn
             CROSS JOIN LATERAL (SELECT * FROM (%2$s) y OFFSET 0) x
             WHERE x.ev_partition = it.part_id AND (x.ev_owner IS NULL OR x.ev_owner = -$4) AND x.ev_extra1 = it.txn
        )
        SELECT DISTINCT f.i
          FROM (SELECT * FROM bym UNION ALL SELECT * FROM byt) f
          JOIN l ON l.gc_partition = f.part_id
         WHERE pg_visible_in_snapshot(f.ev_txid, l.gc_lo) OR coalesce(f.ev_time < l.gc_from, false)
            OR (l.gc_pos_txid IS NOT NULL AND pg_visible_in_snapshot(f.ev_txid, l.gc_hi)
                AND (f.ev_txid, f.ev_id) <= (l.gc_pos_txid, l.gc_pos))
        $sql$,
            (SELECT string_agg(format('SELECT e.ev_id, e.ev_txid, e.ev_time, e.ev_partition, e.ev_owner, e.ev_extra1 '
                                      'FROM %s e WHERE e.ev_id = (''x'' || substr(replace(it.txn, ''-'', ''''), 17, 16))'
                                      '::bit(64)::bigint & 18014398509481983', pgque.event_table(i_queue_id, t.n)),
                               ' UNION ALL ' ORDER BY t.o)
               FROM unnest(i_tables) WITH ORDINALITY t(n, o)),
            (SELECT string_agg(format('SELECT e.ev_id, e.ev_txid, e.ev_time, e.ev_partition, e.ev_owner, e.ev_extra1 '
                                      'FROM %s e WHERE e.ev_id = (''x'' || substr(replace(d.dd_msg::text, ''-'', ''''), 17, 16))'
                                      '::bit(64)::bigint & 18014398509481983', pgque.event_table(i_queue_id, t.n)),
                               ' UNION ALL ' ORDER BY t.o)
               FROM unnest(i_tables) WITH ORDINALITY t(n, o))) || '; END';
    RETURN NEXT;

    -- group_ack_fast: group_ack's fast path (one consumer acks, completed,
    -- the first n events after the position of the batch it holds, in
    -- order): lock the cursor if the lease is live and the caller's
    -- (lease id $5, or none and the batch delivered once) with no ack held
    -- ahead under it, then read the first n events after the position
    -- (the read of group_ack's batch read, bounded at n: l is the locked
    -- row, a variable) and, if they are exactly the items' keys in order
    -- ($1, distinct), move the position over them in one UPDATE (the
    -- lease released at the batch end) and return group_ack's rows.
    -- No rows: not that case (nothing written; group_ack's general path
    -- answers). $2 queue, $3 group, $4 partition, $6 queue name.
    fn_kind := 'group_ack_fast';
    fn_args := 'text[], int, int, int, uuid, text';
    fn_result := 'TABLE (idx int, transaction_id text, success boolean, error text, lease_released boolean, dlq boolean, '
                 'noop boolean, queue_name text, partition_id int, redeliver boolean)';
    fn_volatility := 'VOLATILE';
    fn_body := E'DECLARE l pgque.group_cursor;\nBEGIN ' || $sql$
        SELECT gc.* INTO l FROM pgque.group_cursor gc
         WHERE gc.gc_queue = $2 AND gc.gc_group = $3 AND gc.gc_partition = $4
           AND gc.gc_lease IS NOT NULL AND gc.gc_lease_until > now()
           AND coalesce(gc.gc_lease = $5, $5 IS NULL AND gc.gc_attempts <= 1)
           AND NOT coalesce(gc.gc_acked_lease = gc.gc_lease AND cardinality(gc.gc_acked) > 0, false)
           FOR UPDATE;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        RETURN QUERY $sql$ || format($sql$
        WITH ev AS MATERIALIZED (
            SELECT x.ev_id, x.ev_txid, coalesce(x.ev_extra1, pgque.message_uuid($2, x.ev_id, x.ev_time)::text) AS k,
                   row_number() OVER (ORDER BY x.ev_txid, x.ev_id) AS n
              FROM (%s) x
             WHERE (x.ev_txid, x.ev_id) <= (l.gc_end_txid, l.gc_lease_end)
        ), it AS MATERIALIZED (
            SELECT u.t, u.o FROM unnest($1::text[]) WITH ORDINALITY u(t, o)
        ), ok AS MATERIALIZED (
            SELECT e.ev_id, e.ev_txid, e.ev_id = l.gc_lease_end AS fin,
                   coalesce(l.gc_fail_ev IN (SELECT ev.ev_id FROM ev), false) AS unfail
              FROM ev e
             WHERE e.n = cardinality($1)
               AND NOT EXISTS (SELECT 1 FROM it LEFT JOIN ev ON ev.n = it.o WHERE ev.k IS DISTINCT FROM it.t)
               AND (SELECT count(DISTINCT it.t) FROM it) = cardinality($1)
        ), up AS (
            UPDATE pgque.group_cursor gc
               SET gc_pos_txid = ok.ev_txid, gc_pos = ok.ev_id, gc_active = now(),
                   gc_lease = CASE WHEN ok.fin THEN NULL ELSE gc.gc_lease END,
                   gc_lease_until = CASE WHEN ok.fin THEN NULL ELSE gc.gc_lease_until END,
                   gc_end_txid = CASE WHEN ok.fin THEN NULL ELSE gc.gc_end_txid END,
                   gc_lease_end = CASE WHEN ok.fin THEN NULL ELSE gc.gc_lease_end END,
                   gc_attempts = CASE WHEN ok.fin THEN 0 ELSE gc.gc_attempts END,
                   gc_fail_ev = CASE WHEN ok.unfail THEN NULL ELSE gc.gc_fail_ev END,
                   gc_fails = CASE WHEN ok.unfail THEN 0 ELSE gc.gc_fails END,
                   gc_acked = NULL, gc_acked_lease = NULL
              FROM ok
             WHERE gc.gc_queue = $2 AND gc.gc_group = $3 AND gc.gc_partition = $4
            RETURNING ok.fin
        )
        SELECT (it.o - 1)::int, it.t, true, NULL::text, up.fin AND it.o = cardinality($1), false, false, $6, $4, false
          FROM up CROSS JOIN it
         ORDER BY it.o
        $sql$,
            pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos',
            'l.gc_end_txid', 'cardinality($1)', '-l.gc_group', 'l.gc_from')) || '; END';
    RETURN NEXT;

    fn_kind := 'group_pending';
    fn_args := 'int, int, int, int, boolean, pg_snapshot';
    fn_result := 'TABLE (partition_id int, lease_until timestamptz, last_active timestamptz)';
    -- VOLATILE: the statement takes its snapshot after locking the
    -- group_cursor children (a STABLE one reads with its caller's snapshot,
    -- which may predate a rotation it waited behind: group_pending).
    fn_volatility := 'VOLATILE';
    -- Candidates first, then the exact probe on them only. An event a
    -- cursor has not consumed is after its position and not visible in
    -- gc_lo, or not visible in gc_hi: so its ev_txid is at or above the
    -- cursor's floor, least(greatest(xmin(gc_lo), gc_pos_txid), xmin(gc_hi)).
    -- A partition without a cursor is judged from the subscription (none:
    -- from the start): not visible in gs_lo. One ev_txid range scan of the
    -- live event tables from the least floor (lease-held cursors aside;
    -- xmin(gs_lo) too while some partition has no cursor) yields every event
    -- any cursor may not have consumed; a partition is a candidate when one
    -- of its events passes that cursor's test above (necessary for the
    -- exact probe to find one), or when its lease is live. The event read
    -- stops at 64 per partition + 1000 rows: past that (a backlog) every
    -- partition is a candidate, as before this scan existed. The rest of
    -- the work is one read of the group's cursor rows and a count of the
    -- queue's partitions (µs per row, not a probe per partition). Both
    -- steps are one statement, one snapshot: an event the probe could see
    -- is one the scan saw.
    fn_body := 'BEGIN RETURN QUERY ' || format($sql$
        WITH sub AS (
            SELECT coalesce((SELECT gs.gs_lo FROM pgque.group_subscription gs
                              WHERE gs.gs_queue = $1 AND gs.gs_group = $2), '1:1:'::pg_snapshot) AS lo
        ), cur AS MATERIALIZED (
            SELECT gc.gc_partition AS pid, gc.gc_lo AS lo_snap, gc.gc_hi AS hi_snap,
                   gc.gc_pos_txid AS pos_txid, gc.gc_pos AS pos,
                   coalesce(gc.gc_lease IS NOT NULL AND gc.gc_lease_until > now(), false) AS leased,
                   least(greatest(pg_snapshot_xmin(gc.gc_lo), coalesce(gc.gc_pos_txid, '0'::xid8)),
                         pg_snapshot_xmin(gc.gc_hi)) AS floor
              FROM pgque.group_cursor gc
             WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition > coalesce($3::int, -1)
        ), parts AS MATERIALIZED (
            SELECT count(*) AS n FROM pgque.partition p WHERE p.part_queue = $1 AND p.part_id > coalesce($3::int, -1)
        ), bound AS MATERIALIZED (
            SELECT CASE WHEN (SELECT pa.n FROM parts pa) > (SELECT count(*) FROM cur)
                        THEN (SELECT s.lo FROM sub s) END AS nocur_lo,
                   (SELECT c.floor FROM cur c WHERE NOT c.leased ORDER BY c.floor LIMIT 1) AS cur_floor
        ), lim AS MATERIALIZED (
            SELECT b.nocur_lo, 64 * (SELECT pa.n FROM parts pa) + 1000 AS cap,
                   CASE WHEN b.nocur_lo IS NULL OR b.cur_floor < pg_snapshot_xmin(b.nocur_lo)
                        THEN b.cur_floor ELSE pg_snapshot_xmin(b.nocur_lo) END AS t
              FROM bound b
        ), ev AS MATERIALIZED (
            SELECT e.ev_partition AS pid, e.ev_txid, e.ev_id
              FROM lim CROSS JOIN LATERAL (%s) e
             WHERE e.ev_partition > coalesce($3::int, -1)
        ), over AS MATERIALIZED (
            -- more events above the floor than 64 per partition (a
            -- backlog): every partition is a candidate (the exact probe,
            -- one per partition, then costs less than reading the backlog)
            SELECT (SELECT count(*) FROM ev) > (SELECT lim.cap FROM lim) AS o
        ), cand AS (
            -- cursor rows and event rows in one sort by partition, each
            -- event row seeing its partition's cursor (first_value): no
            -- join whose plan rests on row estimates (group_cursor is never
            -- analyzed: a nested loop over 10,000 cursors x 10,000 events
            -- would take seconds). The test is the cursor's visibility
            -- rule itself (not visible in hi, or not visible in lo and after
            -- the position), not its loosening to xmin bounds: under a held
            -- xmin every snapshot's xmin stays at the holder, and the
            -- loosened test listed every partition with an event since.
            SELECT DISTINCT x.pid
              FROM (SELECT u.pid, u.kind, u.ev_txid, u.ev_id,
                           first_value(u.kind) OVER w AS ck, first_value(u.lo_snap) OVER w AS lo_snap,
                           first_value(u.hi_snap) OVER w AS hi_snap, first_value(u.pos_txid) OVER w AS pos_txid,
                           first_value(u.pos) OVER w AS pos, first_value(u.leased) OVER w AS leased,
                           first_value(u.floor) OVER w AS floor
                      FROM (SELECT c.pid, 0 AS kind, NULL::xid8 AS ev_txid, NULL::bigint AS ev_id,
                                   c.lo_snap, c.hi_snap, c.pos_txid, c.pos, c.leased, c.floor
                              FROM cur c
                            UNION ALL
                            SELECT e.pid, 1, e.ev_txid, e.ev_id, NULL::pg_snapshot, NULL::pg_snapshot, NULL, NULL, NULL, NULL
                              FROM ev e) u
                    WINDOW w AS (PARTITION BY u.pid ORDER BY u.kind)) x
             WHERE CASE WHEN x.kind = 0 THEN x.leased AND $5
                        WHEN x.ck = 0 THEN NOT x.leased AND x.ev_txid >= x.floor
                                           AND (NOT pg_visible_in_snapshot(x.ev_txid, x.hi_snap)
                                                OR (NOT pg_visible_in_snapshot(x.ev_txid, x.lo_snap)
                                                    AND (x.pos_txid IS NULL
                                                         OR (x.ev_txid, x.ev_id) > (x.pos_txid, x.pos))))
                        ELSE (SELECT lim.nocur_lo FROM lim) IS NOT NULL
                             AND NOT pg_visible_in_snapshot(x.ev_txid, (SELECT lim.nocur_lo FROM lim)) END
               AND NOT (SELECT over.o FROM over)
            UNION
            SELECT p.part_id FROM pgque.partition p
             WHERE (SELECT over.o FROM over) AND p.part_queue = $1 AND p.part_id > coalesce($3::int, -1)
        )
        -- the exact probe per candidate, in a fenced LATERAL (OFFSET 0):
        -- never evaluated for a partition before it is known a candidate
        SELECT r.part_id, r.lease_until, r.gc_active
          FROM cand k CROSS JOIN LATERAL (
        SELECT p.part_id,
               CASE WHEN gc.gc_lease IS NOT NULL AND gc.gc_lease_until > now() THEN gc.gc_lease_until END AS lease_until,
               gc.gc_active
          FROM pgque.partition p
          LEFT JOIN LATERAL (SELECT gc.* FROM pgque.group_cursor gc
                              WHERE gc.gc_queue = $1 AND gc.gc_group = $2 AND gc.gc_partition = p.part_id OFFSET 0) gc ON true
         CROSS JOIN sub gs
         CROSS JOIN LATERAL (
               SELECT p.part_id AS gc_partition,
                      coalesce(gc.gc_lo, gs.lo) AS gc_lo,
                      coalesce(gc.gc_hi, gs.lo) AS gc_hi,
                      gc.gc_pos_txid, gc.gc_pos,
                      CASE WHEN gc.gc_partition IS NULL
                           THEN (SELECT s.gs_from FROM pgque.group_subscription s WHERE s.gs_queue = $1 AND s.gs_group = $2)
                           ELSE gc.gc_from END AS gc_from) l
         WHERE p.part_queue = $1 AND p.part_id = k.pid
           AND CASE WHEN gc.gc_lease IS NOT NULL AND gc.gc_lease_until > now() THEN $5
                    ELSE EXISTS (%s) OR EXISTS (%s) END
         OFFSET 0) r
         ORDER BY r.part_id
         LIMIT $4
        $sql$,
            pgque.group_txid_scan_sql(i_queue_id, i_tables, 'lim.t', 'lim.cap + 1'),
            pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos', NULL, '1', '-$2', 'l.gc_from'),
            pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_hi', '$6', NULL, NULL, NULL, '1', '-$2', 'l.gc_from')) || '; END';
    RETURN NEXT;

    fn_kind := 'push_fresh';
    fn_args := 'int[], jsonb[], text';
    fn_result := 'TABLE (idx int, message_id uuid, transaction_id text, queue_name text, status text, partition_id int)';
    fn_volatility := 'VOLATILE';
    fn_body := 'BEGIN RETURN QUERY ' || format($sql$
        WITH ins AS (
            INSERT INTO %s (ev_type, ev_data, ev_partition)
            SELECT 'default', u.d::text, u.p FROM unnest($1::int[], $2::jsonb[]) u(p, d)
            RETURNING ev_id, ev_partition
        )
        SELECT (row_number() OVER (ORDER BY i.ev_id) - 1)::int, m.id, m.id::text, $3, 'queued'::text, i.ev_partition
          FROM ins i CROSS JOIN LATERAL (SELECT pgque.message_uuid(%s, i.ev_id, now()) AS id) m
         ORDER BY i.ev_id
        $sql$, format('pgque.%I', 'event_' || i_queue_id || '_' || i_tables[1]), i_queue_id) || '; END';
    RETURN NEXT;

    fn_kind := 'push_dedup';
    fn_args := 'int[], jsonb[], text[], text, interval';
    fn_result := 'TABLE (idx int, message_id uuid, transaction_id text, queue_name text, status text, partition_id int)';
    fn_volatility := 'VOLATILE';
    fn_body := 'BEGIN RETURN QUERY ' || format($sql$
        WITH it AS (
            SELECT u.o::int AS idx, u.p AS part_id, u.d AS pl, nullif(u.t, '') AS txn
              FROM unnest($1::int[], $2::jsonb[], $3::text[]) WITH ORDINALITY u(p, d, t, o)
        ), looked AS (
            -- first_idx: the item this one repeats (itself when it has no
            -- transactionId); dd_msg: a first's recorded original
            SELECT f.*, pr.dd_msg
              FROM (SELECT it.*, CASE WHEN it.txn IS NULL THEN it.idx
                                      ELSE min(it.idx) OVER (PARTITION BY it.part_id, it.txn) END AS first_idx
                      FROM it) f
              LEFT JOIN LATERAL (
                    SELECT d.dd_msg FROM pgque.dedup d
                     WHERE f.txn IS NOT NULL AND f.idx = f.first_idx
                       AND d.dd_queue = %2$s AND d.dd_partition = f.part_id AND d.dd_txn = f.txn
                       AND d.dd_time > now() - $5::interval
                     ORDER BY d.dd_time LIMIT 1) pr ON true
        ), ins AS (
            -- ev_id from the column default, drawn after the sort: in idx order
            INSERT INTO %1$s (ev_type, ev_data, ev_extra1, ev_partition)
            SELECT 'default', l.pl::text, l.txn, l.part_id FROM looked l
             WHERE l.idx = l.first_idx AND l.dd_msg IS NULL ORDER BY l.idx
            RETURNING ev_id
        ), fresh AS (
            SELECT f.idx, i.ev_id
              FROM (SELECT l.idx, row_number() OVER (ORDER BY l.idx) AS rn FROM looked l
                     WHERE l.idx = l.first_idx AND l.dd_msg IS NULL) f
              JOIN (SELECT ins.ev_id, row_number() OVER (ORDER BY ins.ev_id) AS rn FROM ins) i ON i.rn = f.rn
        ), res AS (
            SELECT l.idx, l.first_idx, l.txn, l.part_id, fr.ev_id,
                   coalesce(pgque.message_uuid(%2$s, fr.ev_id, now()), l.dd_msg) AS msg
              FROM looked l LEFT JOIN fresh fr ON fr.idx = l.idx
        ), dd AS (
            INSERT INTO pgque.dedup (dd_gen, dd_queue, dd_partition, dd_txn, dd_msg)
            SELECT pgque.dedup_gen(now()), %2$s, r.part_id, r.txn, r.msg FROM res r
             WHERE r.ev_id IS NOT NULL AND r.txn IS NOT NULL
        )
        SELECT (r.idx - 1)::int, coalesce(r.msg, f.msg), coalesce(r.txn, coalesce(r.msg, f.msg)::text), $4,
               CASE WHEN r.ev_id IS NOT NULL THEN 'queued' ELSE 'duplicate' END, r.part_id
          FROM res r LEFT JOIN res f ON f.idx = r.first_idx AND r.msg IS NULL
         ORDER BY r.idx
        $sql$, format('pgque.%I', 'event_' || i_queue_id || '_' || i_tables[1]), i_queue_id) || '; END';
    RETURN NEXT;

    fn_kind := 'group_advance_idle';
    fn_args := 'int, pg_snapshot, bigint';
    fn_result := 'int';
    fn_volatility := 'VOLATILE';
    fn_body := 'DECLARE v_rows int; BEGIN ' || format($sql$
        WITH idle AS (
            SELECT l.gc_group, l.gc_partition FROM pgque.group_cursor l
             WHERE l.gc_queue = $1 AND (l.gc_lease IS NULL OR l.gc_lease_until <= now())
               -- only where the range start's xmin (the rotation pin)
               -- would rise: $2 is a new snapshot on every call, and an
               -- idle cursor rewritten on each blocked rotation attempt
               -- would only make dead tuples
               AND pg_snapshot_xmin(l.gc_lo) < pg_snapshot_xmin($2)
               -- never back: hi at or before $2 (every transaction hi
               -- sees, $2 sees: hi's xmax not above $2's, and no
               -- transaction in flight at $2 visible in hi). Rechecked on
               -- the newest row version by FOR UPDATE: a claim that
               -- committed since closed its range at a later snapshot.
               AND pg_snapshot_xmax(l.gc_hi) <= pg_snapshot_xmax($2)
               AND NOT EXISTS (SELECT 1 FROM pg_snapshot_xip($2) x WHERE pg_visible_in_snapshot(x, l.gc_hi))
               AND NOT EXISTS (%s) AND NOT EXISTS (%s)
               FOR UPDATE SKIP LOCKED
        )
        UPDATE pgque.group_cursor gc
           SET gc_lo = $2, gc_hi = $2, gc_tick = $3, gc_pos_txid = NULL, gc_pos = NULL, gc_lease = NULL,
               gc_lease_until = NULL, gc_end_txid = NULL, gc_lease_end = NULL, gc_attempts = 0, gc_fail_ev = NULL, gc_fails = 0,
               gc_active = now()
          FROM idle i
         WHERE gc.gc_queue = $1 AND gc.gc_group = i.gc_group AND gc.gc_partition = i.gc_partition
        $sql$,
            pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_lo', 'l.gc_hi', 'l.gc_pos_txid', 'l.gc_pos', NULL, '1',
            '-l.gc_group', 'l.gc_from'),
            pgque.group_range_sql(i_queue_id, i_tables, 'l.gc_hi', '$2', NULL, NULL, NULL, '1', '-l.gc_group', 'l.gc_from')) || '; GET DIAGNOSTICS v_rows = ROW_COUNT; RETURN v_rows; END';
    RETURN NEXT;

    -- push_direct: the broker's push of items without transactionId into
    -- one queue, called by the broker itself (no pgque.push around it:
    -- SECURITY DEFINER, executable by pgque_writer; group_plans grants it)
    -- with the queue id, current table and partition ids it cached
    -- (pgque.push_route). The xid is taken first (a simple expression, no
    -- query), so the INSERT's snapshot reads the queue row after it, as
    -- insert_event does. Fails closed, inserting nothing and returning no
    -- row, when what the caller cached is stale or its input is not that
    -- shape: the queue $3 is not this id any more (dropped, recreated),
    -- the current table is not this one (a switch), a partition id is not
    -- one of the queue's (partitions stay while their queue exists: a
    -- caller's bug), a payload is NULL, the arrays differ in length
    -- or are empty. The caller then pushes through pgque.push (which
    -- checks and answers everything) and looks the route up again.
    -- Otherwise one INSERT ... RETURNING (ev_id from the column default,
    -- drawn in input order) of each item's message id and partition id,
    -- one row per item in input order (the INSERT returns its rows as it
    -- inserts them, in its SELECT's order: unnest's, which only one-time
    -- filters gate - every test is uncorrelated, no join may reorder it). A
    -- REPEATABLE
    -- READ / SERIALIZABLE caller gets check_insert_table's 40001 after a
    -- switch its snapshot missed.
    fn_kind := 'push_direct';
    fn_args := 'int[], jsonb[], text';
    fn_result := 'TABLE (message_id uuid, partition_id int)';
    fn_volatility := 'VOLATILE SECURITY DEFINER';
    fn_body := format($sql$DECLARE v_xid xid8; v_n bigint;
    BEGIN
        v_xid := pg_current_xact_id();  -- the xid first, then the queue row
        RETURN QUERY
        INSERT INTO %1$s (ev_type, ev_data, ev_partition)
        SELECT 'default', u.d::text, u.p FROM unnest($1::int[], $2::jsonb[]) u(p, d)
         WHERE EXISTS (SELECT 1 FROM pgque.queue q
                        WHERE q.queue_id = %2$s AND q.queue_cur_table = %3$s AND q.queue_name = $3)
           AND cardinality($1) = cardinality($2) AND array_position($2, NULL) IS NULL
           AND NOT EXISTS (SELECT 1 FROM unnest($1::int[]) x
                            WHERE NOT EXISTS (SELECT 1 FROM pgque.partition p WHERE p.part_queue = %2$s AND p.part_id = x))
        RETURNING pgque.message_uuid(%2$s, ev_id, now()), ev_partition;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 AND current_setting('transaction_isolation') <> 'read committed' THEN
            PERFORM pgque.check_insert_table(%2$s, %3$s, (SELECT q.queue_ntables FROM pgque.queue q WHERE q.queue_id = %2$s));
        END IF;
    END$sql$, format('pgque.%I', 'event_' || i_queue_id || '_' || i_tables[1]), i_queue_id, i_tables[1]);
    RETURN NEXT;

    -- ack_direct: group_ack's fast path for the broker to call itself
    -- (SECURITY DEFINER, executable by pgque_reader; group_plans grants
    -- it) with the queue, partition and group ids and the current table it
    -- cached (pgque.ack_route): when the queue $5 is still this id with
    -- this current table, the queue's group_ack_fast for this table ($1
    -- the items' transactionIds, $2 group, $3 partition, $4 lease id or
    -- NULL), whose rows are group_ack's; no row when that is not its case
    -- (nothing was written). Otherwise (a stale route: the queue dropped
    -- or recreated, its tables switched) one row with idx -1 and nothing
    -- written; so too when the group $2 is gone (deleted, maybe made again
    -- under a new id). Either way the broker then acks through pgque.group_ack,
    -- which answers every case.
    fn_kind := 'ack_direct';
    fn_args := 'text[], int, int, uuid, text';
    fn_result := 'TABLE (idx int, transaction_id text, success boolean, error text, lease_released boolean, dlq boolean, '
                 'noop boolean, queue_name text, partition_id int, redeliver boolean)';
    fn_volatility := 'VOLATILE SECURITY DEFINER';
    fn_body := format($sql$BEGIN
        IF NOT EXISTS (SELECT 1 FROM pgque.queue q WHERE q.queue_id = %1$s AND q.queue_cur_table = %2$s AND q.queue_name = $5)
           OR NOT EXISTS (SELECT 1 FROM pgque.broker_group g WHERE g.grp_id = $2) THEN
            RETURN QUERY SELECT -1, NULL::text, false, 'stale route'::text, false, false, false, $5, $3, false;
            RETURN;
        END IF;
        RETURN QUERY SELECT * FROM pgque.%3$I($1, %1$s, $2, $3, $4, $5);
    END$sql$, i_queue_id, i_tables[1], 'group_ack_fast_q' || i_queue_id || '_t' || i_tables[1]);
    RETURN NEXT;
END;
$$;
