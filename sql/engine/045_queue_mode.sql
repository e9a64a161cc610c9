-- engine/045_queue_mode.sql: the one home of the reserved consumer group of queue
-- mode, '__QUEUE_MODE__': the group that competing consumers share when
-- they name none (one cursor per partition). Every engine file names it
-- through these functions, never the literal (sql/queue_mode_test.go fails
-- on a second copy outside comments; Go's home is broker.QueueMode, and the
-- same test checks the two agree).
--
-- Plain SQL without a SET clause; their bodies are SQL-standard (RETURN),
-- parsed once at creation, so they resolve nothing through a caller's
-- search_path. The planner inlines a call (EXPLAIN shows
-- the constant), so they cost nothing; STABLE, not IMMUTABLE, for the
-- reason given in 040_lock_ids.sql. A SECURITY DEFINER caller calls them
-- schema-qualified. Locks: none. Writes: nothing.
--
--   pgque.queue_mode_group() = '__QUEUE_MODE__'.
--   pgque.group_name_or_default(i_group) = i_group, or queue_mode_group()
--     when i_group is NULL or '' (what a request naming no group means).
-- Called by: the broker's group functions (sql/broker/), queue_depth's
-- default.
CREATE OR REPLACE FUNCTION pgque.queue_mode_group()
RETURNS pg_catalog.text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN '__QUEUE_MODE__';

CREATE OR REPLACE FUNCTION pgque.group_name_or_default(i_group pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN COALESCE(NULLIF(i_group, ''), pgque.queue_mode_group());
