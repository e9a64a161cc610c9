-- broker/530_broker_maintenance.sql: the brokers' maintenance switches, shared by
-- every broker of the database (POST /api/v1/system/maintenance[/pop]).
--   push  pushes (and transactions with pushes, DLQ replays) are refused
--         with 503 and Retry-After: nothing is buffered, nothing stored;
--   pop   pops answer empty (204); nothing is lost, acks still work.
-- Write pattern: one UPDATE per switch (admin-rate). Brokers keep the state
-- in memory: a change NOTIFYs channel pgque.maintenance (each broker
-- re-reads on it) and a broker re-reads it at most every few seconds
-- anyway; never once per request.
--
-- pgque.broker_maintenance(): the switches now.
-- Returns: (push_paused, pop_paused). Locks: none. Writes: nothing.
-- Called by: the broker (its cached state, GET /api/v1/system/maintenance).
--
-- pgque.set_broker_maintenance(i_mode, i_enabled): switch push or pop
-- maintenance on or off for every broker of the database and NOTIFY
-- pgque.maintenance (payload: the mode) at commit.
-- Errors: i_mode not push / pop, or a NULL i_enabled -> invalid_parameter_value.
-- Returns: the switches after the change (push_paused, pop_paused).
-- Locks: the switch's row. Writes: broker_maintenance.
-- Called by: the broker (POST /api/v1/system/maintenance[/pop]), operators.
CREATE TABLE IF NOT EXISTS pgque.broker_maintenance (
    bm_mode    text        PRIMARY KEY CHECK (bm_mode IN ('push', 'pop')),
    bm_enabled boolean     NOT NULL DEFAULT false,
    bm_changed timestamptz NOT NULL DEFAULT now()
);
INSERT INTO pgque.broker_maintenance (bm_mode) VALUES ('push'), ('pop') ON CONFLICT (bm_mode) DO NOTHING;

CREATE OR REPLACE FUNCTION pgque.broker_maintenance()
RETURNS TABLE (push_paused boolean, pop_paused boolean)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT coalesce(bool_or(m.bm_enabled) FILTER (WHERE m.bm_mode = 'push'), false),
           coalesce(bool_or(m.bm_enabled) FILTER (WHERE m.bm_mode = 'pop'), false)
      FROM pgque.broker_maintenance m;
$$;

CREATE OR REPLACE FUNCTION pgque.set_broker_maintenance(i_mode text, i_enabled boolean)
RETURNS TABLE (push_paused boolean, pop_paused boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    IF i_mode IS NULL OR i_mode NOT IN ('push', 'pop') OR i_enabled IS NULL THEN
        RAISE EXCEPTION 'pgque: maintenance mode must be push or pop and enabled true or false (got %, %)', i_mode, i_enabled
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgque.broker_maintenance AS m (bm_mode, bm_enabled) VALUES (i_mode, i_enabled)
    ON CONFLICT (bm_mode) DO UPDATE SET bm_enabled = excluded.bm_enabled, bm_changed = now()
     WHERE m.bm_enabled IS DISTINCT FROM excluded.bm_enabled;
    PERFORM pg_notify('pgque.maintenance', i_mode);
    RETURN QUERY SELECT * FROM pgque.broker_maintenance();
END;
$$;
