-- pgque.subscribe(queue, consumer) / pgque.unsubscribe(queue, consumer):
-- PgQue's names for register_consumer / unregister_consumer.
-- Returns: 1 changed, 0 nothing to do. Locks/writes: as those functions.
-- Called by: consumers, admins.
CREATE OR REPLACE FUNCTION pgque.subscribe(queue text, consumer text)
RETURNS int
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT pgque.register_consumer_at(queue, consumer, NULL);
$$;

CREATE OR REPLACE FUNCTION pgque.unsubscribe(queue text, consumer text)
RETURNS int
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT pgque.unregister_consumer(queue, consumer);
$$;
