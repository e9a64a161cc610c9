-- pgque.group_ack(i_group, i_transaction_ids, i_partition_ids, i_statuses,
-- i_lease_ids, i_errors, i_tenant): acknowledge messages of a consumer
-- group, item i being (transactionId, partition UUID, status, lease id or
-- NULL, error text or NULL), processed in order. i_tenant confines the
-- call to one broker tenant's queues (queue_in_tenant; NULL: every queue):
-- a partition of another tenant's queue is an unknown partition.
-- Status: NULL / completed / success / acked / ok -> completed; 'dlq' ->
-- dead-lettered now (if deadLetterQueue); 'retry' -> redelivered without
-- spending a retry; anything else -> failed: spends one retry; once more
-- than retryLimit (default 3) failures were spent on it, it is
-- dead-lettered (deadLetterQueue and dlqAfterMaxRetries, default true;
-- else dropped) like 'dlq'; otherwise as 'retry'.
-- The order of the acks inside a leased batch does not matter: the
-- position moves only over a contiguous prefix of resolved (completed or
-- dead-lettered) events, never over an event nobody acked. An event
-- resolved ahead of an unresolved one is remembered on the cursor
-- (gc_acked, for that lease only) until the events before it are resolved;
-- a retry / failed ack ahead of unresolved events waits there the same way
-- (its retry is spent at once). When the next event after the position is
-- a retry, the lease is released and the batch is redelivered from it;
-- when the position reaches the batch end, the lease is released. A lease
-- that ends otherwise (expiry) is redelivered from the position: events
-- nobody acked are redelivered, never counted as done (events resolved
-- ahead of them come again too; a dead-lettered one may then be both in
-- the DLQ and redelivered, at least once).
-- A message at or below the position (in any retained event table, not
-- only the open range: a repeated ack after the next pop moved the range
-- on; whatever lease id it carries), or already resolved under this
-- lease -> success, noop (the same ack twice is a noop the second time;
-- the first status given for a message wins). An item named by a custom
-- transactionId is found through the dedup table, so only while its
-- dedup slot is kept (dedupWindowSeconds, at least); a message id always. A wrong or expired lease ->
-- success false, 'invalid or expired lease'; so is an ack without a lease
-- id of a batch delivered more than once (gc_attempts > 1: a consumer
-- whose lease expired may still hold it, and without the lease id its ack
-- cannot be told from the current holder's); an unknown partition ->
-- success false, 'unknown partition'. Returns: (idx 0-based,
-- transaction_id, success, error, lease_released, dlq, noop, queue_name,
-- partition_id, redeliver: the lease was released for a retry, so the
-- batch comes back (false when released at the batch end)) per item
-- (queue_name, partition_id NULL for an unknown partition).
-- Fast path: the common case - every item completed (NULL or a
-- lower-case completed / success / acked / ok), all on one partition,
-- under one lease id (or none), and the items exactly the next events
-- after the position in batch order - is recognised by a simple
-- expression and runs 4 statements: the lookup of the partition's queue
-- (in the tenant) and group, and the queue's generated
-- pgque.group_ack_fast_q<queue>_t<table>, which locks the cursor only if
-- its lease is live and the caller's with no ack held ahead, reads the
-- first n events after the position and, when they are the items in
-- order, moves the position over them in one UPDATE (the lease released
-- at the batch end). When it returns nothing (it then wrote nothing), the
-- general path below answers; either way the rows and the cursor are the
-- general path's (TestGroupAckFastPathSameAnswers).
-- Set-based: the items' cursors are locked at once (key order); one read
-- per queue matches the items against their leased batches, (position,
-- batch end] through the (ev_partition, ev_txid, ev_id) index (each event
-- keyed by its transactionId, else its message id, then hash-joined to
-- the items, with the event before it in the batch), then, only for
-- items not found there, a test of whether they are done (at or below the
-- position): each item's event ids from its message id (it carries the
-- event id) or the dedup table (a transactionId), one (ev_id) index
-- probe per event table each, compared with the cursor; the items are
-- then applied in order in memory to the cursors as the lock read them,
-- and every cursor changed is written by ONE UPDATE for the whole call
-- (one row each). Cost: O(items + leased events), a fixed number of
-- statements (plus O(acks held ahead) per item in memory). Its statements
-- run with generic plans (plan_cache_mode, set and restored inside).
-- Locks: the items' cursor rows (FOR UPDATE, waits, in (queue, partition)
-- order). Writes: group_cursor (one UPDATE for every cursor changed),
-- group_dead_letter. The two reads run in the queue's generated functions
-- pgque.group_ack_q<queue>_t<table> / group_ack_below_q<queue>_t<table>
-- (group_plans): planned once per session, not per call.
-- Called by: the broker (ack, ack batch, transactions).
DO $drop$
BEGIN
    -- Earlier installs had no i_tenant: a new argument list is a new
    -- function, so the old one goes (re-running the install keeps this one).
    IF to_regprocedure('pgque.group_ack(text, text[], uuid[], text[], uuid[], text[])') IS NOT NULL THEN
        DROP FUNCTION pgque.group_ack(text, text[], uuid[], text[], uuid[], text[]);
    END IF;
END;
$drop$;
CREATE OR REPLACE FUNCTION pgque.group_ack(i_group text, i_transaction_ids text[], i_partition_ids uuid[],
                                           i_statuses text[], i_lease_ids uuid[], i_errors text[],
                                           i_tenant text DEFAULT NULL)
RETURNS TABLE (idx int, transaction_id text, success boolean, error text, lease_released boolean, dlq boolean, noop boolean,
               queue_name text, partition_id int, redeliver boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_n       int := coalesce(cardinality(i_transaction_ids), 0);
    v_group   int;
    v_queue   pgque.queue;
    v_suffix  text;
    v_opts    jsonb;
    v_lim     int;
    v_dlqok   boolean;
    v_dlqmax  boolean;
    -- per item, filled per queue: the event found in the leased batch
    -- (after the position) and the one before it there; found below the position
    a_ev_id   bigint[] := array_fill(NULL::bigint, ARRAY[v_n]);
    a_ev_time timestamptz[] := array_fill(NULL::timestamptz, ARRAY[v_n]);
    a_ev_txid xid8[] := array_fill(NULL::xid8, ARRAY[v_n]);
    a_ev_data text[] := array_fill(NULL::text, ARRAY[v_n]);
    a_pv_txid xid8[] := array_fill(NULL::xid8, ARRAY[v_n]);
    a_pv_id   bigint[] := array_fill(NULL::bigint, ARRAY[v_n]);
    a_below   boolean[] := array_fill(false, ARRAY[v_n]);
    r         record;
    -- results, by item
    o_success boolean[] := array_fill(false, ARRAY[v_n]);
    o_error   text[] := array_fill(NULL::text, ARRAY[v_n]);
    o_rel     boolean[] := array_fill(false, ARRAY[v_n]);
    o_dlq     boolean[] := array_fill(false, ARRAY[v_n]);
    o_noop    boolean[] := array_fill(false, ARRAY[v_n]);
    o_redo    boolean[] := array_fill(false, ARRAY[v_n]);
    o_queue   text[] := array_fill(NULL::text, ARRAY[v_n]);
    o_part    int[] := array_fill(NULL::int, ARRAY[v_n]);
    -- the cursor being applied (its state after the items so far)
    c_queue   int;
    c_part    int;
    c_gc      pgque.group_cursor;
    -- the items' cursors as locked (key order), and the ones to write back
    a_gc      pgque.group_cursor[];
    a_out     pgque.group_cursor[] := '{}';
    v_j       int := 1;
    c_dirty   boolean := false;
    v_status  text;
    v_i       int;
    v_live    boolean;
    v_fails   int;
    v_guc     text[];
    -- the items' partitions, another tenant's replaced by NULL (unknown)
    v_parts   uuid[] := i_partition_ids;
    -- the cursor's acks ahead of its position (gc_acked, this lease's)
    c_acked   pgque.group_acked[];
    v_held    boolean;
    v_next    boolean;
    v_k       int;
    v_m       int;
    -- the fast path's queue, partition, current table, rows returned
    f_queue   int;
    f_part    int;
    f_table   int;
    f_qname   text;
    f_rows    bigint;
BEGIN
    IF cardinality(i_partition_ids) IS DISTINCT FROM v_n
       OR (i_statuses IS NOT NULL AND cardinality(i_statuses) <> v_n)
       OR (i_lease_ids IS NOT NULL AND cardinality(i_lease_ids) <> v_n)
       OR (i_errors IS NOT NULL AND cardinality(i_errors) <> v_n) THEN
        RAISE EXCEPTION 'pgque: group_ack needs one transaction id, partition id (and status, lease id, error when given) per item'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;
    -- The fast path (the common shape: one consumer acks, completed, the
    -- batch it holds on one partition, under one lease id or none): the
    -- shape is a simple expression (no query); then one lookup of the
    -- partition's queue (in the tenant) and the group, and one call of the
    -- queue's generated group_ack_fast (planned once per session), which
    -- locks the cursor if the lease is live and the caller's with no ack
    -- held ahead, and moves the position in one UPDATE if the items are
    -- exactly the next events after it, in order. Anything else (no row
    -- back: nothing was written) takes the general path below, which
    -- gives the same answers for that case.
    IF i_partition_ids[1] IS NOT NULL AND i_partition_ids[1] = ALL (i_partition_ids)
       AND array_position(i_transaction_ids, NULL) IS NULL
       AND (i_statuses IS NULL OR array_replace(i_statuses, NULL, 'completed') <@ ARRAY['completed', 'success', 'acked', 'ok', ''])
       AND (i_lease_ids IS NULL OR cardinality(array_remove(i_lease_ids, NULL)) = 0
            OR i_lease_ids[1] IS NOT NULL AND i_lease_ids[1] = ALL (i_lease_ids)) THEN
        SELECT p.part_queue, p.part_id, q.queue_cur_table, q.queue_name, g.grp_id
          INTO f_queue, f_part, f_table, f_qname, v_group
          FROM pgque.partition p
          JOIN pgque.queue q ON q.queue_id = p.part_queue
          JOIN pgque.broker_group g ON g.grp_name = pgque.group_name_or_default(i_group)
         WHERE p.part_uuid = i_partition_ids[1]
           AND (i_tenant IS NULL OR pgque.queue_in_tenant(q.queue_name, i_tenant));
        IF FOUND THEN
            RETURN QUERY EXECUTE 'SELECT * FROM pgque.group_ack_fast_q' || f_queue || '_t' || f_table || '($1, $2, $3, $4, $5, $6)'
            USING i_transaction_ids, f_queue, v_group, f_part, i_lease_ids[1], f_qname;
            GET DIAGNOSTICS f_rows = ROW_COUNT;
            IF f_rows > 0 THEN
                RETURN;
            END IF;
        END IF;
    END IF;
    -- Generic plans for this function's statements, and index probes only
    -- (as the generated functions: group_plans), set here and restored
    -- before it returns (an error rolls them back with the transaction or
    -- savepoint; a SECURITY DEFINER function carries no SET clause but
    -- search_path): under plan_cache_mode auto the cursor lock and the
    -- queue loop below got a custom plan on every call (their array
    -- parameters made custom plans look cheaper), 0.35 ms of planning per
    -- ack; the one UPDATE of the cursors must probe (queue, group,
    -- partition), never scan the group's cursors (group_cursor is never
    -- analyzed: its estimates favour a scan).
    v_guc := ARRAY[current_setting('plan_cache_mode'), current_setting('enable_seqscan'), current_setting('enable_bitmapscan')];
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
            set_config('enable_bitmapscan', 'off', true);
    IF i_tenant IS NOT NULL THEN
        -- Another tenant's partition is one that does not exist: its UUID
        -- matches nothing below (no lock, no read, 'unknown partition').
        SELECT array_agg(CASE WHEN q.queue_id IS NOT NULL THEN u.pu END ORDER BY u.o) INTO v_parts
          FROM unnest(i_partition_ids) WITH ORDINALITY u(pu, o)
          LEFT JOIN pgque.partition p ON p.part_uuid = u.pu
          LEFT JOIN pgque.queue q ON q.queue_id = p.part_queue AND pgque.queue_in_tenant(q.queue_name, i_tenant);
    END IF;
    SELECT grp_id INTO v_group FROM pgque.broker_group WHERE grp_name = pgque.group_name_or_default(i_group);
    -- Lock every cursor of the batch at once, in key order (no deadlock
    -- between two batches naming the same cursors in other orders): the
    -- items' (queue, partition) keys sorted, each cursor probed by its key
    -- in that order (never a scan of the group's every cursor).
    -- The rows locked are the cursors the items are applied to below (no
    -- second read per cursor).
    SELECT coalesce(array_agg(c.gc ORDER BY k.part_queue, k.part_id), '{}') INTO a_gc
       FROM (SELECT DISTINCT p.part_queue, p.part_id FROM pgque.partition p
              WHERE p.part_uuid = ANY (v_parts) ORDER BY p.part_queue, p.part_id OFFSET 0) k
      CROSS JOIN LATERAL (SELECT gc FROM pgque.group_cursor gc
                           WHERE gc.gc_queue = k.part_queue AND gc.gc_group = v_group AND gc.gc_partition = k.part_id
                             FOR UPDATE) c;
    FOR v_queue IN SELECT q.* FROM pgque.queue q
                    WHERE q.queue_id IN (SELECT p.part_queue FROM pgque.partition p WHERE p.part_uuid = ANY (v_parts))
                    ORDER BY q.queue_id LOOP
        -- The leased batches: (position, batch end], each event keyed by its
        -- transactionId (else its message id), matched to the items by hash.
        -- (generated: pgque.group_ack_q<queue>_t<current table>, group_plans)
        v_suffix := '_q' || v_queue.queue_id || '_t' || v_queue.queue_cur_table;
        FOR r IN EXECUTE format('SELECT * FROM pgque.%I($1, $2, $3, $4)', 'group_ack' || v_suffix)
          USING i_transaction_ids, v_parts, v_queue.queue_id, v_group
        LOOP
            a_ev_id[r.i] := r.ev_id; a_ev_time[r.i] := r.ev_time; a_ev_txid[r.i] := r.ev_txid; a_ev_data[r.i] := r.ev_data;
            a_pv_txid[r.i] := r.pv_txid; a_pv_id[r.i] := r.pv_id;
        END LOOP;
        -- Items not found there: are they done (at or below the position,
        -- in the open range or before it)? Index probes for those only.
        IF EXISTS (SELECT 1 FROM unnest(i_transaction_ids, v_parts, a_ev_id) WITH ORDINALITY u(t, pu, e, o)
                     JOIN pgque.partition p ON p.part_uuid = u.pu AND p.part_queue = v_queue.queue_id
                    WHERE u.t IS NOT NULL AND u.e IS NULL) THEN
            FOR r IN EXECUTE format('SELECT * FROM pgque.%I($1, $2, $3, $4, $5)', 'group_ack_below' || v_suffix)
              USING i_transaction_ids, v_parts, v_queue.queue_id, v_group, a_ev_id
            LOOP
                a_below[r.i] := true;
            END LOOP;
        END IF;
    END LOOP;

    -- Apply the items in order, cursor by cursor; write each cursor once.
    FOR r IN SELECT u.o::int AS i, u.t AS txn, u.st, u.ls, u.er, p.part_queue, p.part_id, q.queue_name AS qname,
                    q.queue_options
               FROM unnest(i_transaction_ids, v_parts,
                           coalesce(i_statuses, array_fill(NULL::text, ARRAY[v_n])),
                           coalesce(i_lease_ids, array_fill(NULL::uuid, ARRAY[v_n])),
                           coalesce(i_errors, array_fill(NULL::text, ARRAY[v_n]))) WITH ORDINALITY u(t, pu, st, ls, er, o)
               LEFT JOIN pgque.partition p ON p.part_uuid = u.pu
               LEFT JOIN pgque.queue q ON q.queue_id = p.part_queue
              ORDER BY p.part_queue NULLS FIRST, p.part_id, u.o
    LOOP
        v_i := r.i;
        IF r.txn IS NULL OR r.part_id IS NULL THEN
            o_error[v_i] := CASE WHEN r.txn IS NULL THEN 'transactionId is required' ELSE 'unknown partition' END;
            CONTINUE;
        END IF;
        o_queue[v_i] := r.qname; o_part[v_i] := r.part_id;
        IF c_queue IS DISTINCT FROM r.part_queue OR c_part IS DISTINCT FROM r.part_id THEN
            IF c_dirty THEN
                c_gc.gc_acked := CASE WHEN cardinality(c_acked) > 0 THEN c_acked END;
                c_gc.gc_acked_lease := CASE WHEN cardinality(c_acked) > 0 THEN c_gc.gc_lease END;
                a_out := a_out || c_gc;
            END IF;
            c_queue := r.part_queue; c_part := r.part_id; c_dirty := false;
            -- both in (queue, partition) order: walk a_gc along
            WHILE v_j <= cardinality(a_gc)
                  AND (a_gc[v_j].gc_queue, a_gc[v_j].gc_partition) < (r.part_queue, r.part_id) LOOP
                v_j := v_j + 1;
            END LOOP;
            IF v_j <= cardinality(a_gc) AND a_gc[v_j].gc_queue = r.part_queue AND a_gc[v_j].gc_partition = r.part_id THEN
                c_gc := a_gc[v_j];
            ELSE
                c_gc := NULL;
            END IF;
            -- the acks held ahead count only under the lease that took them
            c_acked := CASE WHEN c_gc.gc_lease IS NOT NULL AND c_gc.gc_acked_lease = c_gc.gc_lease
                            THEN coalesce(c_gc.gc_acked, '{}') ELSE '{}' END;
            v_opts := pgque.broker_options(r.queue_options);
            v_lim := (v_opts ->> 'retryLimit')::int;
            v_dlqok := (v_opts ->> 'deadLetterQueue')::boolean;
            v_dlqmax := (v_opts ->> 'dlqAfterMaxRetries')::boolean;
        END IF;
        IF c_gc.gc_partition IS NULL THEN
            o_error[v_i] := 'invalid or expired lease';
            CONTINUE;
        END IF;
        v_status := lower(coalesce(r.st, 'completed'));
        v_status := CASE WHEN v_status IN ('completed', 'success', 'acked', 'ok', '') THEN 'completed'
                         WHEN v_status IN ('retry', 'dlq') THEN v_status ELSE 'failed' END;
        -- The lease is the item's when it names it, or, naming none, when
        -- the batch was delivered once only (after a redelivery a consumer
        -- whose lease expired may still hold it: without the lease id its
        -- ack would complete what the current holder is working on).
        v_held := coalesce(c_gc.gc_lease IS NOT NULL AND c_gc.gc_lease_until > now(), false);
        v_live := v_held AND coalesce(r.ls = c_gc.gc_lease, r.ls IS NULL AND c_gc.gc_attempts <= 1);
        IF NOT v_live OR a_ev_id[v_i] IS NULL
           OR (c_gc.gc_pos_txid IS NOT NULL AND (a_ev_txid[v_i], a_ev_id[v_i]) <= (c_gc.gc_pos_txid, c_gc.gc_pos)) THEN
            -- Not in the live batch after the position: in a live batch that
            -- is a noop (at or below the cursor, or not in this batch);
            -- otherwise only an ack at or below the cursor is fine.
            IF v_live OR a_below[v_i]
               OR (a_ev_id[v_i] IS NOT NULL AND c_gc.gc_pos_txid IS NOT NULL
                   AND (a_ev_txid[v_i], a_ev_id[v_i]) <= (c_gc.gc_pos_txid, c_gc.gc_pos)) THEN
                o_success[v_i] := true; o_noop[v_i] := true;
            ELSE
                o_error[v_i] := 'invalid or expired lease';
            END IF;
            CONTINUE;
        END IF;
        -- Resolved already under this lease: the same ack again (or another
        -- status for it; the first wins) is a noop.
        v_k := NULL;
        FOR v_m IN 1 .. cardinality(c_acked) LOOP
            IF (c_acked[v_m]).ev_id = a_ev_id[v_i] THEN
                v_k := v_m;
                EXIT;
            END IF;
        END LOOP;
        IF v_k IS NOT NULL THEN
            o_success[v_i] := true; o_noop[v_i] := true;
            CONTINUE;
        END IF;
        -- Next after the position: the event before it in the batch is the
        -- position (or it is the batch's first).
        v_next := a_pv_id[v_i] IS NULL
                  OR (c_gc.gc_pos_txid IS NOT NULL AND (a_pv_txid[v_i], a_pv_id[v_i]) <= (c_gc.gc_pos_txid, c_gc.gc_pos));
        v_fails := CASE WHEN c_gc.gc_fail_ev = a_ev_id[v_i] THEN c_gc.gc_fails ELSE 0 END + 1;
        IF v_status = 'failed' AND v_fails > v_lim THEN
            v_status := 'exhausted';
        END IF;
        c_dirty := true;
        c_gc.gc_active := now();
        o_success[v_i] := true;
        IF v_status IN ('retry', 'failed') THEN
            IF v_status = 'failed' THEN
                c_gc.gc_fail_ev := a_ev_id[v_i]; c_gc.gc_fails := v_fails;
            END IF;
            IF v_next THEN
                -- Redelivered from this message: the lease is released (the
                -- position stays before it).
                c_gc.gc_lease := NULL; c_gc.gc_lease_until := NULL; c_gc.gc_end_txid := NULL; c_gc.gc_lease_end := NULL;
                c_acked := '{}';
                o_rel[v_i] := true; o_redo[v_i] := true;
            ELSE
                -- Earlier events are still out: it waits for them.
                c_acked := c_acked || ROW(a_ev_id[v_i], a_ev_txid[v_i], a_pv_id[v_i], true)::pgque.group_acked;
            END IF;
            CONTINUE;
        END IF;
        IF v_status = 'dlq' AND v_dlqok OR v_status = 'exhausted' AND v_dlqok AND v_dlqmax THEN
            INSERT INTO pgque.group_dead_letter (gdl_queue, gdl_group, gdl_partition, gdl_msg, gdl_txn, gdl_ev_id,
                                                 gdl_created, gdl_data, gdl_error, gdl_retries)
            VALUES (r.part_queue, v_group, r.part_id, pgque.message_uuid(r.part_queue, a_ev_id[v_i], a_ev_time[v_i]),
                    r.txn, a_ev_id[v_i], a_ev_time[v_i], a_ev_data[v_i], r.er, v_fails - 1)
            ON CONFLICT (gdl_queue, gdl_group, gdl_ev_id) DO NOTHING;
            o_dlq[v_i] := true;
        END IF;
        IF c_gc.gc_fail_ev = a_ev_id[v_i] THEN
            c_gc.gc_fail_ev := NULL; c_gc.gc_fails := 0;
        END IF;
        IF NOT v_next THEN
            -- Resolved ahead of an event still out: held until it is.
            c_acked := c_acked || ROW(a_ev_id[v_i], a_ev_txid[v_i], a_pv_id[v_i], false)::pgque.group_acked;
            CONTINUE;
        END IF;
        c_gc.gc_pos_txid := a_ev_txid[v_i]; c_gc.gc_pos := a_ev_id[v_i];
        -- The acks held ahead that now follow the position: the position
        -- moves over the resolved ones; a retry releases the lease there.
        LOOP
            v_k := NULL;
            FOR v_m IN 1 .. cardinality(c_acked) LOOP
                IF (c_acked[v_m]).pv_id = c_gc.gc_pos THEN
                    v_k := v_m;
                    EXIT;
                END IF;
            END LOOP;
            EXIT WHEN v_k IS NULL;
            IF (c_acked[v_k]).retry THEN
                c_gc.gc_lease := NULL; c_gc.gc_lease_until := NULL; c_gc.gc_end_txid := NULL; c_gc.gc_lease_end := NULL;
                c_acked := '{}';
                o_rel[v_i] := true; o_redo[v_i] := true;
                EXIT;
            END IF;
            c_gc.gc_pos_txid := (c_acked[v_k]).ev_txid; c_gc.gc_pos := (c_acked[v_k]).ev_id;
            c_acked := c_acked[:v_k - 1] || c_acked[v_k + 1:];
        END LOOP;
        IF c_gc.gc_lease IS NOT NULL AND c_gc.gc_pos = c_gc.gc_lease_end THEN
            c_gc.gc_lease := NULL; c_gc.gc_lease_until := NULL; c_gc.gc_end_txid := NULL; c_gc.gc_lease_end := NULL;
            c_gc.gc_attempts := 0;
            c_acked := '{}';
            o_rel[v_i] := true;
        END IF;
    END LOOP;
    IF c_dirty THEN
        c_gc.gc_acked := CASE WHEN cardinality(c_acked) > 0 THEN c_acked END;
        c_gc.gc_acked_lease := CASE WHEN cardinality(c_acked) > 0 THEN c_gc.gc_lease END;
        a_out := a_out || c_gc;
    END IF;
    -- Every cursor changed, in one statement (one row each).
    IF cardinality(a_out) > 0 THEN
        UPDATE pgque.group_cursor gc
           SET gc_pos_txid = u.gc_pos_txid, gc_pos = u.gc_pos, gc_lease = u.gc_lease,
               gc_lease_until = u.gc_lease_until, gc_end_txid = u.gc_end_txid,
               gc_lease_end = u.gc_lease_end, gc_attempts = u.gc_attempts,
               gc_fail_ev = u.gc_fail_ev, gc_fails = u.gc_fails, gc_active = u.gc_active,
               gc_acked = u.gc_acked, gc_acked_lease = u.gc_acked_lease
          FROM unnest(a_out) u
         WHERE gc.gc_queue = u.gc_queue AND gc.gc_group = u.gc_group AND gc.gc_partition = u.gc_partition;
    END IF;
    RETURN QUERY
        SELECT (u.o - 1)::int, u.t, u.s, u.e, u.rl, u.d, u.nn, u.qn, u.pi, u.rd
          FROM unnest(i_transaction_ids, o_success, o_error, o_rel, o_dlq, o_noop, o_queue, o_part, o_redo)
               WITH ORDINALITY u(t, s, e, rl, d, nn, qn, pi, rd, o)
         ORDER BY u.o;
    PERFORM set_config('plan_cache_mode', v_guc[1], true), set_config('enable_seqscan', v_guc[2], true),
            set_config('enable_bitmapscan', v_guc[3], true);
END;
$$;
