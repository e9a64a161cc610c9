-- pgque.get_setting(i_name): the value of an installation setting.
-- Returns: text, NULL when the setting is unset. Locks: none. Reads: settings.
-- Called by: the ticker, rotation, ticker_loop, pgquectl.
CREATE OR REPLACE FUNCTION pgque.get_setting(i_name text)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    RETURN (SELECT value FROM pgque.settings WHERE name = i_name);
END;
$$;
