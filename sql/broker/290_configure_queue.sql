-- pgque.configure_queue(i_queue, i_namespace, i_task, i_options): create the
-- queue if needed and set its broker options from i_options, a JSON object
-- with the names of Queen's POST /api/v1/configure (every option it takes):
-- leaseTime, retryLimit, delayedProcessing, windowBuffer, retentionSeconds,
-- completedRetentionSeconds, dedupWindowSeconds, maxWaitTimeSeconds
-- (integers 0 .. 2^31-1), minPopWaitTime (an integer >= 0, clamped to
-- 60000 as Queen does), priority, ttl, maxSize, retryDelay (integers >= 0),
-- retentionSinkHoldMaxSeconds (60 .. 31536000), deadLetterQueue,
-- dlqAfterMaxRetries, encryptionEnabled, retentionEnabled (booleans),
-- retentionSinkHold (text matching [A-Za-z0-9._-]{0,64}), storage ('rows'
-- or 'segments'). Which of them are enforced: options_not_enforced.
-- Absent keys keep their value, a JSON null resets one to its default;
-- namespace / task (NULL: keep) label the queue for pops by namespace and
-- task. Stored in queue_options under the snake_case names set_queue_config
-- uses. An unknown key or a wrong type or range raises
-- invalid_parameter_value and changes nothing.
-- Returns: (queue_id, queue_name, namespace, task, options (broker_options)).
-- Locks: the queue's tick lock (as set_queue_config), its row.
-- Writes: queue (and what broker_create_queue writes). Called by: the broker
-- (POST /api/v1/configure).
CREATE OR REPLACE FUNCTION pgque.configure_queue(i_queue text, i_namespace text, i_task text, i_options jsonb)
RETURNS TABLE (queue_id int, queue_name text, namespace text, task text, options jsonb)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_map   constant jsonb := '{"leaseTime":"lease_time","retryLimit":"retry_limit","delayedProcessing":"delayed_processing",
        "windowBuffer":"window_buffer","retentionSeconds":"retention_seconds",
        "completedRetentionSeconds":"completed_retention_seconds","dedupWindowSeconds":"dedup_window",
        "maxWaitTimeSeconds":"max_wait_time_seconds","deadLetterQueue":"dead_letter_queue",
        "dlqAfterMaxRetries":"dlq_after_max_retries","encryptionEnabled":"encryption_enabled",
        "priority":"priority","ttl":"ttl","maxSize":"max_size","retryDelay":"retry_delay",
        "retentionEnabled":"retention_enabled","minPopWaitTime":"min_pop_wait_time",
        "retentionSinkHold":"retention_sink_hold","retentionSinkHoldMaxSeconds":"retention_sink_hold_max_seconds",
        "storage":"storage"}';
    v_bools constant text[] := ARRAY['deadLetterQueue', 'dlqAfterMaxRetries', 'encryptionEnabled', 'retentionEnabled'];
    v_free  constant text[] := ARRAY['priority', 'ttl', 'maxSize', 'retryDelay'];
    v_key   text;
    v_val   jsonb;
    v_new   jsonb;
BEGIN
    IF i_options IS NOT NULL AND jsonb_typeof(i_options) <> 'object' THEN
        RAISE EXCEPTION 'pgque: queue options must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(i_namespace) > 255 OR octet_length(i_task) > 255 OR i_namespace ~ '[[:cntrl:]]' OR i_task ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'pgque: namespace and task are at most 255 bytes without control characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pgque.broker_create_queue(i_queue);
    v_queue := pgque.find_queue(i_queue);
    PERFORM pg_advisory_xact_lock(pgque.lock_id_queue_tick_class(), v_queue.queue_id);
    SELECT * INTO v_queue FROM pgque.queue q WHERE q.queue_id = v_queue.queue_id FOR UPDATE;
    v_new := v_queue.queue_options;
    FOR v_key, v_val IN SELECT * FROM jsonb_each(coalesce(i_options, '{}')) LOOP
        IF NOT v_map ? v_key THEN
            RAISE EXCEPTION 'pgque: unknown queue option "%"', v_key
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Options: ' || (SELECT string_agg(k, ', ' ORDER BY k) FROM jsonb_object_keys(v_map) k) || '.';
        END IF;
        IF jsonb_typeof(v_val) = 'null' THEN
            v_new := v_new - (v_map ->> v_key);
        ELSIF v_key = ANY (v_bools) THEN
            IF jsonb_typeof(v_val) <> 'boolean' THEN
                RAISE EXCEPTION 'pgque: queue option % must be true or false (got %)', v_key, v_val
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            v_new := v_new || jsonb_build_object(v_map ->> v_key, v_val);
        ELSIF v_key = 'retentionSinkHold' THEN
            IF jsonb_typeof(v_val) <> 'string' OR v_val #>> '{}' !~ '^[A-Za-z0-9._-]{0,64}$' THEN
                RAISE EXCEPTION 'pgque: queue option retentionSinkHold must match [A-Za-z0-9._-]{0,64} (got %)', left(v_val::text, 80)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            v_new := v_new || jsonb_build_object(v_map ->> v_key, v_val);
        ELSIF v_key = 'storage' THEN
            IF jsonb_typeof(v_val) <> 'string' OR NOT v_val #>> '{}' IN ('rows', 'segments') THEN
                RAISE EXCEPTION 'pgque: queue option storage must be ''rows'' or ''segments'' (got %)', left(v_val::text, 64)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            v_new := v_new || jsonb_build_object(v_map ->> v_key, v_val);
        ELSE
            IF jsonb_typeof(v_val) <> 'number' OR v_val::text !~ '^[0-9]+$'
               OR (NOT v_key = ANY (v_free) AND v_val::numeric > 2147483647) THEN
                RAISE EXCEPTION 'pgque: queue option % must be a whole number >= 0 (got %)', v_key, left(v_val::text, 64)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF v_key = 'retentionSinkHoldMaxSeconds' AND NOT v_val::numeric BETWEEN 60 AND 31536000 THEN
                RAISE EXCEPTION 'pgque: queue option retentionSinkHoldMaxSeconds must be between 60 and 31536000 (got %)', v_val
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF v_key = 'minPopWaitTime' THEN
                v_val := to_jsonb(least(v_val::numeric, 60000)::int);  -- clamped, as Queen does
            END IF;
            v_new := v_new || jsonb_build_object(v_map ->> v_key, v_val);
        END IF;
    END LOOP;
    IF i_namespace IS NOT NULL THEN
        v_new := CASE WHEN i_namespace = '' THEN v_new - 'namespace' ELSE v_new || jsonb_build_object('namespace', i_namespace) END;
    END IF;
    IF i_task IS NOT NULL THEN
        v_new := CASE WHEN i_task = '' THEN v_new - 'task' ELSE v_new || jsonb_build_object('task', i_task) END;
    END IF;
    IF v_new IS DISTINCT FROM v_queue.queue_options THEN
        UPDATE pgque.queue q SET queue_options = v_new WHERE q.queue_id = v_queue.queue_id;
    END IF;
    RETURN QUERY SELECT v_queue.queue_id, v_queue.queue_name, v_new ->> 'namespace', v_new ->> 'task', pgque.broker_options(v_new);
END;
$$;
