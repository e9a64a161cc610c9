-- pgque.create_queue(i_queue_name): create a queue (PgQue's API): its
-- tables, sequences, Default partition, first tick and generated read
-- functions (pgque.broker_create_queue does the work).
-- Names are data: any text of 1..57 bytes without control characters, so
-- the queue's NOTIFY channel is pgque_<name> (a channel is at most 63
-- bytes); the broker's longer names get a hashed channel instead
-- (pgque.queue_channel).
-- Errors: NULL or too long: P0001 (as PgQue); empty, control characters:
-- invalid_parameter_value.
-- Returns: 1 created, 0 already existed. Locks: queue row (insert).
-- Writes: queue, partition, tick; creates objects. Called by: admins.
CREATE OR REPLACE FUNCTION pgque.create_queue(i_queue_name text)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    -- NULL and too long raise P0001 as PgQue does (its clients catch
    -- raise_exception); the refusals PgQue does not have keep 22023.
    IF i_queue_name IS NULL THEN
        RAISE EXCEPTION 'pgque: queue name must not be NULL' USING ERRCODE = 'raise_exception';
    END IF;
    IF i_queue_name = '' THEN
        RAISE EXCEPTION 'pgque: queue name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(i_queue_name) > 57 THEN
        RAISE EXCEPTION 'pgque: queue name "%" is % bytes; the limit is 57 (its NOTIFY channel pgque_<name> must fit 63 bytes)',
            i_queue_name, octet_length(i_queue_name) USING ERRCODE = 'raise_exception';
    END IF;
    RETURN pgque.broker_create_queue(i_queue_name);
END;
$$;
