-- pgque.broker_options(i_options): a queue's broker options with their
-- defaults, as the HTTP API names them (camelCase), from queue_options
-- (snake_case keys, the ones set_queue_config writes). Absent keys take the
-- documented defaults: leaseTime 300, retryLimit 3, deadLetterQueue true,
-- dlqAfterMaxRetries true, delayedProcessing 0, windowBuffer 0,
-- retentionSeconds 0, completedRetentionSeconds 0, dedupWindowSeconds 3600,
-- maxWaitTimeSeconds 0; priority, ttl, maxSize, retryDelay and
-- encryptionEnabled are echoed when set.
-- PL/pgSQL, not SQL: an SQL function with a SET clause cannot be inlined
-- and is parsed and planned on every call (~0.07 ms); PL/pgSQL caches the
-- expression's plan per session.
-- Returns: jsonb. Locks: none. Writes: nothing. Called by: configure_queue,
-- pop_list, push, group_ack, the broker (queue resources).
CREATE OR REPLACE FUNCTION pgque.broker_options(i_options jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'leaseTime', coalesce((i_options ->> 'lease_time')::int, 300),
        'retryLimit', coalesce((i_options ->> 'retry_limit')::int, 3),
        'deadLetterQueue', coalesce((i_options ->> 'dead_letter_queue')::boolean, true),
        'dlqAfterMaxRetries', coalesce((i_options ->> 'dlq_after_max_retries')::boolean, true),
        'delayedProcessing', coalesce((i_options ->> 'delayed_processing')::int, 0),
        'windowBuffer', coalesce((i_options ->> 'window_buffer')::int, 0),
        'retentionSeconds', coalesce((i_options ->> 'retention_seconds')::int, 0),
        'completedRetentionSeconds', coalesce((i_options ->> 'completed_retention_seconds')::int, 0),
        'dedupWindowSeconds', coalesce((i_options ->> 'dedup_window')::int, 3600),
        'maxWaitTimeSeconds', coalesce((i_options ->> 'max_wait_time_seconds')::int, 0),
        'priority', i_options -> 'priority',
        'ttl', i_options -> 'ttl',
        'maxSize', i_options -> 'max_size',
        'retryDelay', i_options -> 'retry_delay',
        'encryptionEnabled', i_options -> 'encryption_enabled'));
END;
$$;
