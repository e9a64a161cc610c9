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
-- Per queue, the INSERT runs in the queue's generated function (group_plans;
-- static, planned once per session), called through a one-line dynamic
-- SELECT (planning a function call costs next to nothing; an EXECUTEd
-- INSERT was parsed, planned and initialised on every call):
-- pgque.push_fresh_q<queue>_t<table> without transactionIds (one INSERT ...
-- RETURNING, the result rows computed in it), else, under the dedup locks,
-- pgque.push_dedup_q<queue>_t<table> (the repeats, the window lookups, the
-- event and dedup INSERTs and the result rows in one statement).
-- The common shape (one existing queue, partitions interned already, every
-- payload given) is recognised by a simple expression and takes a short
-- path: one static lookup of the queue and the partition ids, then the
-- call (4 statements; 6 with transactionIds). Otherwise push validates
-- every item, then per queue (in name order) creates the queue if missing,
-- looks up its items' partitions, interns the missing ones and calls the
-- generated function, its idx mapped back to the input position.
-- Bad input (array lengths differ, a missing queue or payload, invalid
-- names) raises invalid_parameter_value and inserts nothing.
-- Returns: (idx, message_id, transaction_id, queue_name, status,
-- partition_id) per item,
-- idx being its 0-based input position (rows come queue by queue); status
-- 'queued' or 'duplicate'.
-- Locks: advisory (pgque.lock_id_push_partition_class(), key) per (queue, partition) that has items
-- with a transactionId, in key order (serializes dedup checks; queue by
-- queue in name order), as
-- intern_partitions for new partitions, broker_create_queue for new queues.
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
    v_try    int;
    v_idx    int[];
    v_pid    int[];
    v_pls    jsonb[];
    v_txn    text[];
    v_dedup  boolean;
    v_xid    xid8;
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
    -- The xid first, then the queue rows (insert_event's rule): a table
    -- switch this call does not see commits after the xid exists, so its
    -- step 2 txid is above ours and classic readers still read the previous
    -- table for us. A REPEATABLE READ / SERIALIZABLE caller reads the queue
    -- rows through an older snapshot: check_insert_table (below, per queue)
    -- raises 40001 when a switch committed after it, instead of an event
    -- left where no reader looks.
    v_xid := pg_current_xact_id();  -- a simple expression: no statement
    -- transactionIds are checked once, for both paths (none: skipped)
    v_dedup := NOT ('' = ALL (array_replace(v_txns, NULL::text, '')));
    IF v_dedup THEN
        SELECT u.o - 1 INTO v_bad FROM unnest(v_txns) WITH ORDINALITY u(t, o)
         WHERE octet_length(u.t) > 512 OR u.t ~ '[[:cntrl:]]' ORDER BY u.o LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'pgque: push: item % has an invalid transactionId (at most 512 bytes, no control characters)', v_bad
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    -- The fast path (the common shape: every item to one existing queue,
    -- every payload given, every partition interned): one lookup of the
    -- queue and the partition ids, then one call of the queue's generated
    -- push_fresh (no transactionId) or push_dedup (under the dedup locks),
    -- each one statement planned once per session. The shape test is a
    -- simple expression (no query); any other shape, or a partition not
    -- interned yet, takes the general path below.
    IF i_queues[1] <> '' AND i_queues[1] = ALL (i_queues) AND array_position(i_payloads, NULL) IS NULL THEN
        SELECT q.queue_id, q.queue_cur_table, q.queue_ntables, q.queue_options,
               ARRAY(SELECT p.part_id
                       FROM unnest(v_parts) WITH ORDINALITY u(pn, o)
                       JOIN pgque.partition p ON p.part_queue = q.queue_id AND p.part_name = coalesce(u.pn, 'Default')
                      ORDER BY u.o)
          INTO v_queue.queue_id, v_queue.queue_cur_table, v_queue.queue_ntables, v_queue.queue_options, v_pid
          FROM pgque.queue q WHERE q.queue_name = i_queues[1];
        IF FOUND AND cardinality(v_pid) = v_n THEN
            IF NOT v_dedup THEN
                RETURN QUERY EXECUTE 'SELECT * FROM pgque.push_fresh_q' || v_queue.queue_id || '_t' || v_queue.queue_cur_table || '($1, $2, $3)'
                USING v_pid, i_payloads, i_queues[1];
                IF current_setting('transaction_isolation') <> 'read committed' THEN
                    PERFORM pgque.check_insert_table(v_queue.queue_id, v_queue.queue_cur_table, v_queue.queue_ntables);
                END IF;
                RETURN;
            END IF;
            -- the general path's dedup locks (same keys, same order)
            PERFORM pg_advisory_xact_lock(pgque.lock_id_push_partition_class(), k.key)
               FROM (SELECT DISTINCT hashtext(v_queue.queue_id || '/' || u.p) AS key
                       FROM unnest(v_pid, v_txns) u(p, t) WHERE nullif(u.t, '') IS NOT NULL ORDER BY 1) k;
            RETURN QUERY EXECUTE 'SELECT * FROM pgque.push_dedup_q' || v_queue.queue_id || '_t' || v_queue.queue_cur_table || '($1, $2, $3, $4, $5)'
            USING v_pid, i_payloads, v_txns, i_queues[1],
                  make_interval(secs => (pgque.broker_options(v_queue.queue_options) ->> 'dedupWindowSeconds')::int);
            IF current_setting('transaction_isolation') <> 'read committed' THEN
                PERFORM pgque.check_insert_table(v_queue.queue_id, v_queue.queue_cur_table, v_queue.queue_ntables);
            END IF;
            RETURN;
        END IF;
    END IF;
    SELECT u.o - 1 INTO v_bad FROM unnest(i_queues, i_payloads) WITH ORDINALITY u(q, p, o)
     WHERE u.q IS NULL OR u.q = '' OR u.p IS NULL ORDER BY u.o LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'pgque: push: item % has no queue or no payload', v_bad USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR v_qname IN SELECT DISTINCT q FROM unnest(i_queues) q ORDER BY 1 LOOP
        SELECT * INTO v_queue FROM pgque.queue q WHERE q.queue_name = v_qname;
        IF NOT FOUND THEN
            PERFORM pgque.broker_create_queue(v_qname);
            SELECT * INTO v_queue FROM pgque.queue q WHERE q.queue_name = v_qname;
        END IF;
        -- The queue's items (input positions, partition ids - NULL when not
        -- interned yet -, payloads, transactionIds); a second time after
        -- intern_partitions (which validates and creates the names not seen
        -- yet) when some were missing.
        FOR v_try IN 1 .. 2 LOOP
            SELECT array_agg(u.o::int ORDER BY u.o), array_agg(p.part_id ORDER BY u.o),
                   array_agg(u.pl ORDER BY u.o), array_agg(u.t ORDER BY u.o)
              INTO v_idx, v_pid, v_pls, v_txn
              FROM unnest(i_queues, v_parts, i_payloads, v_txns) WITH ORDINALITY u(qn, pn, pl, t, o)
              LEFT JOIN pgque.partition p ON p.part_queue = v_queue.queue_id AND p.part_name = coalesce(u.pn, 'Default')
             WHERE u.qn = v_qname;
            EXIT WHEN array_position(v_pid, NULL) IS NULL;
            IF v_try = 2 THEN
                RAISE EXCEPTION 'pgque: push: partitions of queue % not found after interning them (concurrently dropped queue?): push again', v_qname
                    USING ERRCODE = 'object_not_in_prerequisite_state';
            END IF;
            PERFORM pgque.intern_partitions(v_queue.queue_id,
                ARRAY(SELECT DISTINCT coalesce(u.p, 'Default') FROM unnest(i_queues, v_parts) u(q, p) WHERE u.q = v_qname));
        END LOOP;
        -- The queue's generated function (as above; its 0-based idx mapped
        -- back to the input position).
        IF '' = ALL (array_replace(v_txn, NULL::text, '')) THEN
            RETURN QUERY EXECUTE 'SELECT ($4::int[])[r.idx + 1] - 1, r.message_id, r.transaction_id, r.queue_name, r.status, r.partition_id '
                                 'FROM pgque.push_fresh_q' || v_queue.queue_id || '_t' || v_queue.queue_cur_table || '($1, $2, $3) r'
            USING v_pid, v_pls, v_qname, v_idx;
        ELSE
            PERFORM pg_advisory_xact_lock(pgque.lock_id_push_partition_class(), k.key)
               FROM (SELECT DISTINCT hashtext(v_queue.queue_id || '/' || u.p) AS key
                       FROM unnest(v_pid, v_txn) u(p, t) WHERE nullif(u.t, '') IS NOT NULL ORDER BY 1) k;
            RETURN QUERY EXECUTE 'SELECT ($6::int[])[r.idx + 1] - 1, r.message_id, r.transaction_id, r.queue_name, r.status, r.partition_id '
                                 'FROM pgque.push_dedup_q' || v_queue.queue_id || '_t' || v_queue.queue_cur_table || '($1, $2, $3, $4, $5) r'
            USING v_pid, v_pls, v_txn, v_qname,
                  make_interval(secs => (pgque.broker_options(v_queue.queue_options) ->> 'dedupWindowSeconds')::int), v_idx;
        END IF;
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            PERFORM pgque.check_insert_table(v_queue.queue_id, v_queue.queue_cur_table, v_queue.queue_ntables);
        END IF;
    END LOOP;
END;
$$;
