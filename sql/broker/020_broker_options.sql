-- pgque.broker_options(i_options): a queue's broker options with their
-- defaults, in the shape Queen's configure echoes them (camelCase, every
-- option present), from queue_options (snake_case keys, the ones
-- set_queue_config and configure_queue write). Defaults (Queen's): priority
-- 0, leaseTime 300, retryLimit 3, retryDelay 1000, maxSize 0, ttl 3600,
-- deadLetterQueue true, dlqAfterMaxRetries true, delayedProcessing 0,
-- windowBuffer 0, retentionSeconds 0, completedRetentionSeconds 0,
-- retentionEnabled false, encryptionEnabled false, maxWaitTimeSeconds 0,
-- minPopWaitTime 0, dedupWindowSeconds 3600, retentionSinkHold '',
-- retentionSinkHoldMaxSeconds 604800; storage only when set.
-- PL/pgSQL, not SQL: an SQL function with a SET clause cannot be inlined
-- and is parsed and planned on every call (~0.07 ms); PL/pgSQL caches the
-- expression's plan per session.
-- Returns: jsonb. Locks: none. Writes: nothing. Called by: configure_queue,
-- pop_list, push, group_ack, broker_queues, broker_queue_detail.
CREATE OR REPLACE FUNCTION pgque.broker_options(i_options jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN jsonb_build_object(
        'priority', coalesce(i_options -> 'priority', '0'),
        'leaseTime', coalesce((i_options ->> 'lease_time')::int, 300),
        'retryLimit', coalesce((i_options ->> 'retry_limit')::int, 3),
        'retryDelay', coalesce(i_options -> 'retry_delay', '1000'),
        'maxSize', coalesce(i_options -> 'max_size', '0'),
        'ttl', coalesce(i_options -> 'ttl', '3600'),
        'deadLetterQueue', coalesce((i_options ->> 'dead_letter_queue')::boolean, true),
        'dlqAfterMaxRetries', coalesce((i_options ->> 'dlq_after_max_retries')::boolean, true),
        'delayedProcessing', coalesce((i_options ->> 'delayed_processing')::int, 0),
        'windowBuffer', coalesce((i_options ->> 'window_buffer')::int, 0),
        'retentionSeconds', coalesce((i_options ->> 'retention_seconds')::int, 0),
        'completedRetentionSeconds', coalesce((i_options ->> 'completed_retention_seconds')::int, 0),
        'retentionEnabled', coalesce((i_options ->> 'retention_enabled')::boolean, false),
        'encryptionEnabled', coalesce((i_options ->> 'encryption_enabled')::boolean, false),
        'maxWaitTimeSeconds', coalesce((i_options ->> 'max_wait_time_seconds')::int, 0),
        'minPopWaitTime', coalesce((i_options ->> 'min_pop_wait_time')::int, 0),
        'dedupWindowSeconds', coalesce((i_options ->> 'dedup_window')::int, 3600),
        'retentionSinkHold', coalesce(i_options ->> 'retention_sink_hold', ''),
        'retentionSinkHoldMaxSeconds', coalesce((i_options ->> 'retention_sink_hold_max_seconds')::int, 604800))
        || CASE WHEN i_options ? 'storage' THEN jsonb_build_object('storage', i_options -> 'storage') ELSE '{}' END;
END;
$$;
