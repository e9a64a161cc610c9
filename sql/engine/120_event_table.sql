-- pgque.event_table(i_queue_id, i_n): the quoted, schema-qualified name of
-- child n of a queue's event tables, ready for format('%s'). Names are built
-- from the queue id, never from its (user-supplied) name.
-- Locks: none. Called by: every function that reads or writes events.
CREATE OR REPLACE FUNCTION pgque.event_table(i_queue_id int, i_n int)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT format('pgque.%I', 'event_' || i_queue_id || '_' || i_n);
$$;
