-- pgque.push(i_queues, i_partitions, i_payloads, i_transaction_ids): the
-- broker's push of N items, item i going to queue i_queues[i], partition
-- i_partitions[i] (NULL or a NULL element: "Default"), payload i_payloads[i]
-- (JSON, required), transactionId i_transaction_ids[i] (optional; NULL or
-- '' means none, and the message id stands in for it).
-- Queues and partitions are created on first use. An item whose
-- transactionId was recorded for the same (queue, partition) inside the
-- queue's dedupWindowSeconds (default 3600), or that repeats an earlier item
-- of the same push, is a duplicate: nothing is inserted and the original's
-- message id is returned. Events go to the queue's current event table the
-- way insert_event / send_batch choose it (queue row read without a lock),
-- one set-based INSERT per queue, with ev_partition set, ev_type 'default',
-- ev_data the payload's JSON text, ev_extra1 the given transactionId.
-- The common shape (one existing queue, partitions interned already)
-- takes a fast path: one static lookup of the queue and the partition ids,
-- then the queue's generated pgque.push_fresh_q<queue>_t<table> (no
-- transactionId: one INSERT ... RETURNING, the result rows computed in it)
-- or push_dedup_q<queue>_t<table> (after the transactionId check and the
-- dedup locks: lookups, INSERTs and result rows in one statement), called
-- through a one-line dynamic SELECT. A push to several queues takes the
-- same generated functions for each queue whose partitions are all interned.
-- Otherwise every statement is static (plans cached per session); the INSERT ...
-- SELECT FROM unnest(arrays) into the current event table runs in the
-- queue's generated function pgque.push_insert_q<queue>_t<table>
-- (group_plans; its plan cached per session too), called through a
-- one-line dynamic SELECT (planning a function call costs next to nothing;
-- an EXECUTEd INSERT was parsed, planned and initialised on every call).
-- Partitions are interned and dedup locks / lookups / rows written only
-- when needed.
-- Bad input (array lengths differ, a missing queue or payload, invalid
-- names) raises invalid_parameter_value and inserts nothing.
-- Returns: (idx, message_id, transaction_id, queue_name, status,
-- partition_id) per item,
-- idx being its 0-based input position (rows come queue by queue); status
-- 'queued' or 'duplicate'.
-- Locks: advisory (1885827449, key) per (queue, partition) that has items
-- with a transactionId, in key order (serializes dedup checks), as
-- intern_partitions for new partitions, create_queue for new queues.
-- Writes: event_<q>_<cur> (insert), dedup (insert), partition, queue.
-- Called by: the broker (POST /api/v1/push, transactions).
CREATE OR REPLACE FUNCTION pgque.push(i_queues text[], i_partitions text[], i_payloads jsonb[], i_transaction_ids text[])
RETURNS TABLE (idx int, message_id uuid, transaction_id text, queue_name text, status text, partition_id int)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_n      int := coalesce(cardinality(i_queues), 0);
    v_parts  text[];
    v_txns   text[];
    v_bad    int;
    v_qname  text;
    v_queue  pgque.queue;
    v_window interval;
    v_dedup  boolean;
    v_idx    int[];
    v_pid    int[];
    v_pls    jsonb[];
    v_pl     text[];
    v_txn    text[];
    v_first  int[];
    v_dd     uuid[];
    v_ev     bigint[];
BEGIN
    IF i_queues IS NULL OR i_payloads IS NULL THEN
        RAISE EXCEPTION 'pgque: push needs the items'' queues and payloads (got NULL)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_parts := coalesce(i_partitions, array_fill(NULL::text, ARRAY[v_n]));
    v_txns := coalesce(i_transaction_ids, array_fill(NULL::text, ARRAY[v_n]));
    IF cardinality(i_payloads) <> v_n OR cardinality(v_parts) <> v_n OR cardinality(v_txns) <> v_n THEN
        RAISE EXCEPTION 'pgque: push: % queues, % partitions, % payloads, % transaction ids: one each per item',
            v_n, cardinality(v_parts), cardinality(i_payloads), cardinality(v_txns) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;
    -- The fast path (the common shape: every item to one existing queue,
    -- every payload given, every partition interned): one lookup of the
    -- queue and the partition ids, then one call of the queue's generated
    -- push_fresh (no transactionId) or push_dedup (under the dedup locks),
    -- each one statement planned once per session. The shape test is a
    -- simple expression (no query); any other shape, or a partition not
    -- interned yet, takes the general path below.
    IF i_queues[1] <> '' AND i_queues[1] = ALL (i_queues) AND array_position(i_payloads, NULL) IS NULL THEN
        SELECT q.queue_id, q.queue_cur_table, q.queue_options,
               ARRAY(SELECT p.part_id
                       FROM unnest(v_parts) WITH ORDINALITY u(pn, o)
                       JOIN pgque.partition p ON p.part_queue = q.queue_id AND p.part_name = coalesce(u.pn, 'Default')
                      ORDER BY u.o)
          INTO v_queue.queue_id, v_queue.queue_cur_table, v_queue.queue_options, v_pid
          FROM pgque.queue q WHERE q.queue_name = i_queues[1];
        IF FOUND AND cardinality(v_pid) = v_n THEN
            IF '' = ALL (array_replace(v_txns, NULL::text, '')) THEN
                RETURN QUERY EXECUTE 'SELECT * FROM pgque.push_fresh_q' || v_queue.queue_id || '_t' || v_queue.queue_cur_table || '($1, $2, $3)'
                USING v_pid, i_payloads, i_queues[1];
                RETURN;
            END IF;
            SELECT u.o - 1 INTO v_bad FROM unnest(v_txns) WITH ORDINALITY u(t, o)
             WHERE octet_length(u.t) > 512 OR u.t ~ '[[:cntrl:]]' ORDER BY u.o LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'pgque: push: item % has an invalid transactionId (at most 512 bytes, no control characters)', v_bad
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            -- the general path's dedup locks (same keys, same order)
            PERFORM pg_advisory_xact_lock(1885827449, k.key)
               FROM (SELECT DISTINCT hashtext(v_queue.queue_id || '/' || u.p) AS key
                       FROM unnest(v_pid, v_txns) u(p, t) WHERE nullif(u.t, '') IS NOT NULL ORDER BY 1) k;
            RETURN QUERY EXECUTE 'SELECT * FROM pgque.push_dedup_q' || v_queue.queue_id || '_t' || v_queue.queue_cur_table || '($1, $2, $3, $4, $5)'
            USING v_pid, i_payloads, v_txns, i_queues[1],
                  make_interval(secs => (pgque.broker_options(v_queue.queue_options) ->> 'dedupWindowSeconds')::int);
            RETURN;
        END IF;
    END IF;
    SELECT u.o - 1 INTO v_bad FROM unnest(i_queues, i_payloads) WITH ORDINALITY u(q, p, o)
     WHERE u.q IS NULL OR u.q = '' OR u.p IS NULL ORDER BY u.o LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'pgque: push: item % has no queue or no payload', v_bad USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT u.o - 1 INTO v_bad FROM unnest(v_txns) WITH ORDINALITY u(t, o)
     WHERE octet_length(u.t) > 512 OR u.t ~ '[[:cntrl:]]' ORDER BY u.o LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'pgque: push: item % has an invalid transactionId (at most 512 bytes, no control characters)', v_bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR v_qname IN SELECT DISTINCT q FROM unnest(i_queues) q ORDER BY 1 LOOP
        SELECT * INTO v_queue FROM pgque.queue q WHERE q.queue_name = v_qname;
        IF NOT FOUND THEN
            PERFORM pgque.create_queue(v_qname);
            SELECT * INTO v_queue FROM pgque.queue q WHERE q.queue_name = v_qname;
        END IF;
        -- The queue's items (input positions, partition ids - NULL when not
        -- interned yet -, payloads, transactionIds). With every partition
        -- interned they take the fast path's generated function (as above;
        -- its 0-based idx mapped back to the input position).
        SELECT array_agg(u.o::int ORDER BY u.o), array_agg(p.part_id ORDER BY u.o),
               array_agg(u.pl ORDER BY u.o), array_agg(u.t ORDER BY u.o)
          INTO v_idx, v_pid, v_pls, v_txn
          FROM unnest(i_queues, v_parts, i_payloads, v_txns) WITH ORDINALITY u(qn, pn, pl, t, o)
          LEFT JOIN pgque.partition p ON p.part_queue = v_queue.queue_id AND p.part_name = coalesce(u.pn, 'Default')
         WHERE u.qn = v_qname;
        IF array_position(v_pid, NULL) IS NULL THEN
            IF '' = ALL (array_replace(v_txn, NULL::text, '')) THEN
                RETURN QUERY EXECUTE 'SELECT ($4::int[])[r.idx + 1] - 1, r.message_id, r.transaction_id, r.queue_name, r.status, r.partition_id '
                                     'FROM pgque.push_fresh_q' || v_queue.queue_id || '_t' || v_queue.queue_cur_table || '($1, $2, $3) r'
                USING v_pid, v_pls, v_qname, v_idx;
            ELSE
                PERFORM pg_advisory_xact_lock(1885827449, k.key)
                   FROM (SELECT DISTINCT hashtext(v_queue.queue_id || '/' || u.p) AS key
                           FROM unnest(v_pid, v_txn) u(p, t) WHERE nullif(u.t, '') IS NOT NULL ORDER BY 1) k;
                RETURN QUERY EXECUTE 'SELECT ($6::int[])[r.idx + 1] - 1, r.message_id, r.transaction_id, r.queue_name, r.status, r.partition_id '
                                     'FROM pgque.push_dedup_q' || v_queue.queue_id || '_t' || v_queue.queue_cur_table || '($1, $2, $3, $4, $5) r'
                USING v_pid, v_pls, v_txn, v_qname,
                      make_interval(secs => (pgque.broker_options(v_queue.queue_options) ->> 'dedupWindowSeconds')::int), v_idx;
            END IF;
            CONTINUE;
        END IF;
        -- intern_partitions validates and creates the names not seen yet.
        PERFORM pgque.intern_partitions(v_queue.queue_id,
            ARRAY(SELECT DISTINCT coalesce(u.p, 'Default') FROM unnest(i_queues, v_parts) u(q, p) WHERE u.q = v_qname));
        v_dedup := EXISTS (SELECT 1 FROM unnest(i_queues, v_txns) u(q, t) WHERE u.q = v_qname AND nullif(u.t, '') IS NOT NULL);
        IF v_dedup THEN
            v_window := make_interval(secs => (pgque.broker_options(v_queue.queue_options) ->> 'dedupWindowSeconds')::int);
            PERFORM pg_advisory_xact_lock(1885827449, k.key)
               FROM (SELECT DISTINCT hashtext(v_queue.queue_id || '/' || p.part_id) AS key
                       FROM unnest(i_queues, v_parts, v_txns) u(q, pn, t)
                       JOIN pgque.partition p ON p.part_queue = v_queue.queue_id AND p.part_name = coalesce(u.pn, 'Default')
                      WHERE u.q = v_qname AND nullif(u.t, '') IS NOT NULL
                      ORDER BY 1) k;
        END IF;
        -- The items of this queue: which repeat which, which are recorded
        -- duplicates, and event ids (in input order) for the fresh ones.
        WITH it AS (
            SELECT u.o::int AS idx, p.part_id, u.pl, nullif(u.t, '') AS txn
              FROM unnest(i_queues, v_parts, i_payloads, v_txns) WITH ORDINALITY u(qn, pn, pl, t, o)
              JOIN pgque.partition p ON p.part_queue = v_queue.queue_id AND p.part_name = coalesce(u.pn, 'Default')
             WHERE u.qn = v_qname
        ), firsts AS (
            -- first_idx: the item this one repeats (itself when it has no transactionId)
            SELECT it.*, CASE WHEN it.txn IS NULL THEN it.idx
                              ELSE min(it.idx) OVER (PARTITION BY it.part_id, it.txn) END AS first_idx
              FROM it
        ), looked AS (
            SELECT f.*, pr.dd_msg
              FROM firsts f
              LEFT JOIN LATERAL (
                    SELECT d.dd_msg FROM pgque.dedup d
                     WHERE v_dedup AND f.txn IS NOT NULL AND f.idx = f.first_idx
                       AND d.dd_queue = v_queue.queue_id AND d.dd_partition = f.part_id AND d.dd_txn = f.txn
                       AND d.dd_time > now() - v_window
                     ORDER BY d.dd_time LIMIT 1) pr ON true
        ), fresh AS (
            SELECT s.*, CASE WHEN s.idx = s.first_idx AND s.dd_msg IS NULL
                             THEN nextval(v_queue.queue_event_seq::regclass) END AS ev_id
              FROM (SELECT l.* FROM looked l ORDER BY l.idx) s
        )
        SELECT array_agg(fr.idx ORDER BY fr.idx), array_agg(fr.part_id ORDER BY fr.idx), array_agg(fr.pl::text ORDER BY fr.idx),
               array_agg(fr.txn ORDER BY fr.idx), array_agg(fr.first_idx ORDER BY fr.idx),
               array_agg(fr.dd_msg ORDER BY fr.idx), array_agg(fr.ev_id ORDER BY fr.idx)
          INTO v_idx, v_pid, v_pl, v_txn, v_first, v_dd, v_ev
          FROM fresh fr;
        -- The INSERT is the queue's generated pgque.push_insert_q<queue>_t<table>
        -- (group_plans): its plan is cached per session; only this call is
        -- dynamic (a function call: nothing to plan but the call).
        EXECUTE 'SELECT pgque.push_insert_q' || v_queue.queue_id || '_t' || v_queue.queue_cur_table || '($1, $2, $3, $4)'
        USING v_ev, v_pl, v_txn, v_pid;
        IF v_dedup THEN
            INSERT INTO pgque.dedup (dd_gen, dd_queue, dd_partition, dd_txn, dd_msg)
            SELECT pgque.dedup_gen(now()), v_queue.queue_id, u.p, u.x, pgque.message_uuid(v_queue.queue_id, u.e, now())
              FROM unnest(v_ev, v_txn, v_pid) u(e, x, p)
             WHERE u.e IS NOT NULL AND u.x IS NOT NULL;
        END IF;
        RETURN QUERY
        SELECT r.i - 1, r.msg, coalesce(r.x, r.msg::text), v_qname,
               CASE WHEN r.e IS NOT NULL THEN 'queued' ELSE 'duplicate' END, r.p
          FROM (SELECT u.i, u.x, u.p, u.e,
                       coalesce(pgque.message_uuid(v_queue.queue_id, max(u.e) OVER (PARTITION BY u.f), now()),
                                (max(u.dm::text) OVER (PARTITION BY u.f))::uuid) AS msg
                  FROM unnest(v_idx, v_first, v_ev, v_dd, v_txn, v_pid) u(i, f, e, dm, x, p)) r
         ORDER BY r.i;
    END LOOP;
END;
$$;
