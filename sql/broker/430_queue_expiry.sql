-- pgque.queue_expiry(i_options): how long an event of a queue with these
-- queue_options stays deliverable to consumer groups: the least of
-- retentionSeconds (when retentionEnabled) and maxWaitTimeSeconds, each
-- when > 0; NULL (the default) when neither applies. Pops of consumer
-- groups do not deliver an event whose ev_time is older than now() minus
-- this (pop_list), and event-table rotation moves group cursors past such
-- events (group_expire). Classic consumers (receive) are not affected.
-- Returns: interval or NULL. Locks: none. Writes: nothing.
-- Called by: pop_list, group_expire, options_not_enforced.
CREATE OR REPLACE FUNCTION pgque.queue_expiry(i_options jsonb)
RETURNS interval
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN make_interval(secs => least(
        CASE WHEN (i_options ->> 'retention_enabled')::boolean AND (i_options ->> 'retention_seconds')::int > 0
             THEN (i_options ->> 'retention_seconds')::int END,
        CASE WHEN (i_options ->> 'max_wait_time_seconds')::int > 0
             THEN (i_options ->> 'max_wait_time_seconds')::int END));
END;
$$;
