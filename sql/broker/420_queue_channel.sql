-- pgque.queue_channel(i_queue_name): the NOTIFY channel of a queue's ticks
-- (payload: the tick id), the one rule every LISTENer follows:
-- 'pgque_' || name for a name of at most 57 bytes (every queue the PgQue
-- API, create_queue, can make: PgQue's channel), else 'pgque.' and the
-- first 32 hex digits of the SHA-256 of the UTF-8 name (a broker queue of
-- 58..322 bytes). A channel is at most 63 bytes; the two forms cannot meet
-- ('_' vs '.' after "pgque"), and neither meets the broker's own channels
-- pgque.broker and pgque.hotlist (not 32 hex digits). SHA-256, not md5,
-- so FIPS builds work.
-- Returns: the channel (NULL for NULL). Locks: none. Writes: nothing.
-- Called by: tick_prepare (the NOTIFY), clients that LISTEN.
CREATE OR REPLACE FUNCTION pgque.queue_channel(i_queue_name text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT CASE WHEN octet_length(i_queue_name) <= 57 THEN 'pgque_' || i_queue_name
                ELSE 'pgque.' || left(encode(sha256(convert_to(i_queue_name, 'UTF8')), 'hex'), 32) END
$$;
