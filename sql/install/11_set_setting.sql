-- pgque.set_setting(i_name, i_value): change an installation setting; NULL
-- resets it to its default. The value is stored with surrounding whitespace
-- trimmed, after validation. Errors (nothing is changed): an unknown name
-- raises SQLSTATE 42704 (undefined_object, the hint lists the known names);
-- a value that is malformed or out of range raises 22023
-- (invalid_parameter_value).
-- Returns: the stored value. Locks: the settings row. Writes: settings.
-- Called by: pgquectl tick, administrators.
CREATE OR REPLACE FUNCTION pgque.set_setting(i_name text, i_value text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_value text := btrim(i_value, E' \t\r\n');
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgque.settings WHERE name = i_name) THEN
        RAISE EXCEPTION 'pgque: unknown setting "%"', i_name
            USING ERRCODE = 'undefined_object',
                  HINT = 'Known settings: ' || (SELECT string_agg(name, ', ' ORDER BY name) FROM pgque.settings);
    END IF;
    IF v_value IS NULL THEN
        v_value := CASE i_name
            WHEN 'meta_rotation_max_pages' THEN '4'
            WHEN 'ticker_slot_seconds' THEN '60'
            WHEN 'ticker_overrun_ms' THEN '1500'
            WHEN 'ticker_classic_loop_ms' THEN '1000'
            WHEN 'ticker_lock_timeout_ms' THEN '20'
            WHEN 'notify_max_queue_usage' THEN '0.001'
            WHEN 'cron_run_retention' THEN '1 day'
            WHEN 'ticker_loop_enabled' THEN 'true'
            WHEN 'ticker_debug_round_ms' THEN '0'
            WHEN 'ticker_maint_ms' THEN '0'
        END;
    ELSE
        BEGIN
            CASE i_name
                WHEN 'tick_period_ms' THEN
                    IF v_value::int NOT BETWEEN 1 AND 60000 THEN RAISE EXCEPTION 'out of range'; END IF;
                WHEN 'meta_rotation_period_ms' THEN
                    IF v_value::int NOT BETWEEN 100 AND 3600000 THEN RAISE EXCEPTION 'out of range'; END IF;
                WHEN 'meta_rotation_max_pages' THEN
                    IF v_value::int NOT BETWEEN 1 AND 100000 THEN RAISE EXCEPTION 'out of range'; END IF;
                WHEN 'ticker_slot_seconds' THEN
                    IF v_value::int NOT BETWEEN 1 AND 3600 THEN RAISE EXCEPTION 'out of range'; END IF;
                WHEN 'ticker_overrun_ms' THEN
                    IF v_value::int NOT BETWEEN 0 AND 600000 THEN RAISE EXCEPTION 'out of range'; END IF;
                WHEN 'ticker_classic_loop_ms' THEN
                    IF v_value::int NOT BETWEEN 1 AND 60000 THEN RAISE EXCEPTION 'out of range'; END IF;
                WHEN 'ticker_lock_timeout_ms' THEN
                    IF v_value::int NOT BETWEEN 1 AND 10000 THEN RAISE EXCEPTION 'out of range'; END IF;
                WHEN 'notify_max_queue_usage' THEN
                    IF v_value::float8 NOT BETWEEN 0 AND 1 THEN RAISE EXCEPTION 'out of range'; END IF;
                WHEN 'cron_run_retention' THEN
                    IF v_value::interval < interval '0' THEN RAISE EXCEPTION 'out of range'; END IF;
                WHEN 'ticker_loop_enabled' THEN
                    v_value := v_value::boolean::text;
                WHEN 'ticker_debug_round_ms' THEN
                    IF v_value::int NOT BETWEEN 0 AND 600000 THEN RAISE EXCEPTION 'out of range'; END IF;
                WHEN 'ticker_maint_ms' THEN
                    IF v_value::int NOT BETWEEN 0 AND 3600000 THEN RAISE EXCEPTION 'out of range'; END IF;
            END CASE;
        EXCEPTION WHEN OTHERS THEN
            RAISE EXCEPTION 'pgque: invalid value "%" for setting "%": %', v_value, i_name, SQLERRM
                USING ERRCODE = 'invalid_parameter_value';
        END;
    END IF;
    UPDATE pgque.settings SET value = v_value WHERE name = i_name;
    RETURN v_value;
END;
$$;
