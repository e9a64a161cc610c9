-- pgque.send(queue_name, [type_name,] payload): produce one message.
-- A jsonb payload is validated by its type; a text payload is stored verbatim.
-- type_name defaults to 'default'. Returns: the event id.
-- Locks/writes: as insert_event. Called by: producers (pgque_writer).
CREATE OR REPLACE FUNCTION pgque.send(queue_name text, payload jsonb)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT pgque.insert_event(queue_name, 'default', payload::text, NULL::text, NULL::text, NULL::text, NULL::text));
END;
$$;

CREATE OR REPLACE FUNCTION pgque.send(queue_name text, payload text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT pgque.insert_event(queue_name, 'default', payload, NULL::text, NULL::text, NULL::text, NULL::text));
END;
$$;

CREATE OR REPLACE FUNCTION pgque.send(queue_name text, type_name text, payload jsonb)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT pgque.insert_event(queue_name, type_name, payload::text, NULL::text, NULL::text, NULL::text, NULL::text));
END;
$$;

CREATE OR REPLACE FUNCTION pgque.send(queue_name text, type_name text, payload text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT pgque.insert_event(queue_name, type_name, payload, NULL::text, NULL::text, NULL::text, NULL::text));
END;
$$;
