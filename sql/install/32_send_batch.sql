-- pgque.send_batch(queue_name, [type_name,] payloads): produce many messages
-- with one set-based INSERT. Ids are allocated in input order and returned
-- aligned with it; '{}' returns '{}'; a NULL array raises.
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
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass ''{}'' to send nothing.';
    END IF;
    v_queue := pgque.find_queue(queue_name);
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
