-- pgque.queue_min_rotation(i_options): the least time a queue's event table
-- stays current before maint_rotate_tables_step1 switches away from it,
-- beyond queue_rotation_period: completedRetentionSeconds when
-- retentionEnabled and it is > 0, else NULL. A table is truncated two
-- switches after it stopped being current, so every event - consumed or
-- not - stays on disk at least this long (Queen's completed-message
-- retention, for seeks back in time and tracing).
-- Returns: interval or NULL. Locks: none. Writes: nothing.
-- Called by: maint_rotate_tables_step1.
CREATE OR REPLACE FUNCTION pgque.queue_min_rotation(i_options jsonb)
RETURNS interval
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN make_interval(secs => CASE WHEN (i_options ->> 'retention_enabled')::boolean
                                           AND (i_options ->> 'completed_retention_seconds')::int > 0
                                      THEN (i_options ->> 'completed_retention_seconds')::int END);
END;
$$;
