-- pgque.send_batch(queue_name, [type_name,] payloads): produce many messages
-- with one set-based INSERT. Ids are allocated in input order and returned
-- aligned with it; '{}' returns '{}'; a NULL or multi-dimensional array
-- raises (NULL and an unknown queue with P0001, as PgQue). Takes its xid before reading the queue row and checks the table
-- for REPEATABLE READ / SERIALIZABLE producers, as insert_event does.
-- Locks/writes: as insert_event. Called by: producers (pgque_writer).
CREATE OR REPLACE FUNCTION pgque.send_batch(queue_name text, type_name text, payloads text[])
RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_ids   bigint[];
BEGIN
    IF payloads IS NULL THEN
        RAISE EXCEPTION 'pgque: send_batch needs an array of payloads, not NULL'
            USING ERRCODE = 'raise_exception', HINT = 'Pass ''{}'' to send nothing.';
    END IF;
    IF array_ndims(payloads) > 1 THEN
        RAISE EXCEPTION 'pgque: send_batch needs a one-dimensional array of payloads, got % dimensions', array_ndims(payloads)
            USING ERRCODE = 'array_subscript_error', HINT = 'Pass one payload per element: ARRAY[''a'', ''b''], not ARRAY[[''a'', ''b'']].';
    END IF;
    PERFORM pg_current_xact_id();  -- the xid first, then the queue row (see insert_event)
    v_queue := pgque.find_queue(queue_name, 'raise_exception');
    IF cardinality(payloads) = 0 THEN
        RETURN '{}';
    END IF;
    SELECT array_agg(nextval(v_queue.queue_event_seq) ORDER BY g)
      INTO v_ids
      FROM generate_series(1, cardinality(payloads)) g;
    EXECUTE format('INSERT INTO %s (ev_id, ev_type, ev_data) '
                   'SELECT $1[u.o], $2, u.p FROM unnest($3) WITH ORDINALITY AS u(p, o)',
                   pgque.event_table(v_queue.queue_id, v_queue.queue_cur_table))
      USING v_ids, coalesce(type_name, 'default'), payloads;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM pgque.check_insert_table(v_queue.queue_id, v_queue.queue_cur_table, v_queue.queue_ntables);
    END IF;
    RETURN v_ids;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.send_batch(queue_name text, type_name text, payloads jsonb[])
RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT pgque.send_batch(queue_name, type_name, payloads::text[]));
END;
$$;

CREATE OR REPLACE FUNCTION pgque.send_batch(queue_name text, payloads text[])
RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT pgque.send_batch(queue_name, 'default', payloads));
END;
$$;

CREATE OR REPLACE FUNCTION pgque.send_batch(queue_name text, payloads jsonb[])
RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT pgque.send_batch(queue_name, 'default', payloads::text[]));
END;
$$;
