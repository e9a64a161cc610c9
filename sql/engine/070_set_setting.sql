-- pgque.set_setting(i_name, i_value): change an installation setting; NULL
-- resets it to its default. The value is stored with surrounding whitespace
-- trimmed, after validation against its kind and range: both, and the
-- default, come from pgque.setting_spec(). Errors (nothing is changed): an unknown name
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
    v_spec  record;
BEGIN
    SELECT * INTO v_spec FROM pgque.setting_spec() s WHERE s.name OPERATOR(pg_catalog.=) i_name;
    IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM pgque.settings WHERE name = i_name) THEN
        RAISE EXCEPTION 'pgque: unknown setting "%"', i_name
            USING ERRCODE = 'undefined_object',
                  HINT = 'Known settings: ' || (SELECT string_agg(name, ', ' ORDER BY name) FROM pgque.settings);
    END IF;
    IF v_value IS NULL THEN
        v_value := v_spec.default_value;
    ELSE
        BEGIN
            CASE v_spec.kind
                WHEN 'int' THEN
                    IF v_value::int NOT BETWEEN v_spec.min_value::int AND v_spec.max_value::int THEN
                        RAISE EXCEPTION 'out of range (%..%)', v_spec.min_value, v_spec.max_value;
                    END IF;
                WHEN 'float' THEN
                    IF v_value::float8 NOT BETWEEN v_spec.min_value::float8 AND v_spec.max_value::float8 THEN
                        RAISE EXCEPTION 'out of range (%..%)', v_spec.min_value, v_spec.max_value;
                    END IF;
                WHEN 'interval' THEN
                    IF v_value::interval < v_spec.min_value::interval THEN
                        RAISE EXCEPTION 'out of range (at least %)', v_spec.min_value;
                    END IF;
                WHEN 'bool' THEN
                    v_value := v_value::boolean::text;
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
