-- pgque.set_queue_config(x_queue_name, x_param_name, x_param_value): set one
-- queue parameter ("queue_" prefix optional); NULL resets it to its default;
-- invalid or out-of-range values raise and change nothing. Errors (unknown
-- queue, parameter or value) are P0001, as PgQue's.
-- Params: ticker_max_count, ticker_max_lag, ticker_idle_period, ticker_paused,
-- rotation_period, external_ticker, max_retries, tick_period_ms, and broker
-- options (lease_time, retry_limit, dead_letter_queue, delayed_processing,
-- window_buffer, dedup_window) kept in queue_options.
-- Returns: 1. Locks: the queue's tick lock (waits for a running tick), its row.
-- Writes: queue. Called by: admins, pgquectl tick, broker (configure).
CREATE OR REPLACE FUNCTION pgque.set_queue_config(x_queue_name text, x_param_name text, x_param_value text)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_param text := regexp_replace(coalesce(x_param_name, ''), '^queue_', '');
    v_val   text := x_param_value;
    v_min   int;
    v_max   int;
BEGIN
    v_queue := pgque.find_queue(x_queue_name, 'raise_exception');
    PERFORM pg_advisory_xact_lock(pgque.lock_id_queue_tick_class(), v_queue.queue_id);
    BEGIN
        CASE v_param
            WHEN 'ticker_max_count' THEN
                IF coalesce(v_val::int, 500) < 1 THEN RAISE EXCEPTION 'must be at least 1'; END IF;
                UPDATE pgque.queue SET queue_ticker_max_count = coalesce(v_val::int, 500) WHERE queue_id = v_queue.queue_id;
            WHEN 'ticker_max_lag' THEN
                IF coalesce(v_val::interval, '3 seconds') <= interval '0' THEN RAISE EXCEPTION 'must be positive'; END IF;
                UPDATE pgque.queue SET queue_ticker_max_lag = coalesce(v_val::interval, '3 seconds') WHERE queue_id = v_queue.queue_id;
            WHEN 'ticker_idle_period' THEN
                IF coalesce(v_val::interval, '1 minute') <= interval '0' THEN RAISE EXCEPTION 'must be positive'; END IF;
                UPDATE pgque.queue SET queue_ticker_idle_period = coalesce(v_val::interval, '1 minute') WHERE queue_id = v_queue.queue_id;
            WHEN 'ticker_paused' THEN
                UPDATE pgque.queue SET queue_ticker_paused = coalesce(v_val::boolean, false) WHERE queue_id = v_queue.queue_id;
            WHEN 'rotation_period' THEN
                IF coalesce(v_val::interval, '2 hours') < interval '0' THEN RAISE EXCEPTION 'must not be negative'; END IF;
                UPDATE pgque.queue SET queue_rotation_period = coalesce(v_val::interval, '2 hours') WHERE queue_id = v_queue.queue_id;
            WHEN 'external_ticker' THEN
                UPDATE pgque.queue SET queue_external_ticker = coalesce(v_val::boolean, false) WHERE queue_id = v_queue.queue_id;
            WHEN 'max_retries' THEN
                IF v_val::int < 0 THEN RAISE EXCEPTION 'must not be negative'; END IF;
                UPDATE pgque.queue SET queue_max_retries = v_val::int WHERE queue_id = v_queue.queue_id;
            WHEN 'tick_period_ms' THEN
                -- The range of the installation's tick_period_ms (pgque.setting_spec()).
                SELECT sp.min_value::int, sp.max_value::int INTO v_min, v_max
                  FROM pgque.setting_spec() sp WHERE sp.name OPERATOR(pg_catalog.=) 'tick_period_ms';
                IF v_val::int NOT BETWEEN v_min AND v_max THEN RAISE EXCEPTION 'must be between % and %', v_min, v_max; END IF;
                UPDATE pgque.queue SET queue_tick_period_ms = v_val::int WHERE queue_id = v_queue.queue_id;
            WHEN 'lease_time', 'retry_limit', 'delayed_processing', 'window_buffer', 'dedup_window' THEN
                IF v_val::int < 0 THEN RAISE EXCEPTION 'must not be negative'; END IF;
                UPDATE pgque.queue
                   SET queue_options = CASE WHEN v_val IS NULL THEN queue_options - v_param
                                            ELSE queue_options || jsonb_build_object(v_param, v_val::int) END
                 WHERE queue_id = v_queue.queue_id;
            WHEN 'dead_letter_queue' THEN
                UPDATE pgque.queue
                   SET queue_options = CASE WHEN v_val IS NULL THEN queue_options - v_param
                                            ELSE queue_options || jsonb_build_object(v_param, v_val::boolean) END
                 WHERE queue_id = v_queue.queue_id;
            ELSE
                RAISE EXCEPTION 'unknown parameter';
        END CASE;
    EXCEPTION
        WHEN invalid_text_representation OR invalid_datetime_format OR datetime_field_overflow
             OR numeric_value_out_of_range OR raise_exception THEN
            RAISE EXCEPTION 'pgque: invalid %=% for queue "%": %', x_param_name, coalesce(x_param_value, 'NULL'), x_queue_name, SQLERRM
                USING ERRCODE = 'raise_exception',
                      HINT = 'Parameters: ticker_max_count, ticker_max_lag, ticker_idle_period, ticker_paused, rotation_period, external_ticker, max_retries, tick_period_ms, lease_time, retry_limit, dead_letter_queue, delayed_processing, window_buffer, dedup_window.';
    END;
    RETURN 1;
END;
$$;
