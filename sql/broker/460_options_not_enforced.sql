-- pgque.options_not_enforced(i_options): the options set on a queue (in its
-- queue_options, to a value other than Queen's default) that the engine
-- stores and echoes but does not act on, by their HTTP names in name order:
-- priority (no queue priority in pops by namespace / task), ttl, maxSize
-- (pushes are never refused), retryDelay (a failed message is redelivered
-- at once), encryptionEnabled (payloads are stored as given),
-- minPopWaitTime, retentionSinkHold, retentionSinkHoldMaxSeconds, storage
-- (one storage engine; any value). Every other option is enforced
-- (docs/reference/sql.md "Queue options").
-- Returns: text[] (empty when none). Locks: none. Writes: nothing.
-- Called by: broker_queue_detail.
CREATE OR REPLACE FUNCTION pgque.options_not_enforced(i_options jsonb)
RETURNS text[]
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT coalesce(array_agg(m.http ORDER BY m.http), '{}')
      FROM (VALUES ('priority', 'priority', '0'::jsonb), ('ttl', 'ttl', '3600'), ('maxSize', 'max_size', '0'),
                   ('retryDelay', 'retry_delay', '1000'), ('encryptionEnabled', 'encryption_enabled', 'false'),
                   ('minPopWaitTime', 'min_pop_wait_time', '0'), ('retentionSinkHold', 'retention_sink_hold', '""'),
                   ('retentionSinkHoldMaxSeconds', 'retention_sink_hold_max_seconds', '604800'),
                   ('storage', 'storage', NULL)) m(http, stored, dflt)
     WHERE i_options ? m.stored AND (i_options -> m.stored) IS DISTINCT FROM m.dflt;
$$;
