-- pgque.status(): a quick health summary from inside the database:
-- PostgreSQL version (component 'postgresql'), engine version (component
-- 'pgque', detail = pgque.version(): PgQue 0.2's rows, which clients match
-- on), queues, the oldest tick age among queues with untick'd events, the
-- tick period, and pg_cron jobs when pg_cron lives here. Job names are
-- matched literally: 'pgque_<what>' then exactly cron_job_suffix(), so '_'
-- or '%' in a database name are not wildcards.
-- (pgquectl status is the full report.) Returns: (component, status, detail)
-- with status OK / WARN / CRIT / INFO. VOLATILE: each statement takes its
-- snapshot after locking the rotated tables it reads (subscription count,
-- get_queue_info), never a caller's snapshot that predates a rotation it
-- waited behind (docs/design/engine.md "Metadata rotation").
-- Locks: ACCESS SHARE on the subscription and tick children.
-- Called by: operators.
CREATE OR REPLACE FUNCTION pgque.status()
RETURNS TABLE (component text, status text, detail text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_lag  interval;
    v_jobs int;
BEGIN
    component := 'postgresql'; status := 'INFO'; detail := pg_catalog.version();
    RETURN NEXT;
    component := 'pgque'; status := 'OK'; detail := pgque.version();
    RETURN NEXT;
    component := 'queues'; status := 'INFO';
    detail := (SELECT count(*) FROM pgque.queue)::text || ' queue(s), ' || (SELECT count(*) FROM pgque.subscription)::text || ' subscription(s)';
    RETURN NEXT;
    SELECT max(i.ticker_lag) INTO v_lag FROM pgque.get_queue_info() i
     WHERE i.ev_new > 0 AND NOT i.queue_ticker_paused AND NOT i.queue_external_ticker;
    component := 'ticker';
    status := CASE WHEN v_lag IS NULL OR v_lag < interval '10 seconds' THEN 'OK'
                   WHEN v_lag < interval '60 seconds' THEN 'WARN' ELSE 'CRIT' END;
    detail := CASE WHEN v_lag IS NULL THEN 'no events waiting for a tick'
                   ELSE 'events waiting for a tick for ' || v_lag::text END;
    RETURN NEXT;
    component := 'tick_period'; status := 'INFO';
    detail := coalesce(pgque.get_setting('tick_period_ms') || ' ms', 'classic thresholds (no tick period set)');
    RETURN NEXT;
    component := 'pg_cron';
    IF to_regclass('cron.job') IS NULL THEN
        status := 'INFO'; detail := 'pg_cron is not installed in this database (it may run in another one: see pgquectl status)';
    ELSE
        EXECUTE 'SELECT count(*) FROM cron.job WHERE right(jobname, length($1)) = $1 '
                'AND left(jobname, -length($1)) ~ ''^pgque_[a-z0-9_]+$'''
           INTO v_jobs USING pgque.cron_job_suffix();
        status := CASE WHEN v_jobs > 0 THEN 'OK' ELSE 'WARN' END;
        detail := v_jobs || ' pgque job(s) registered';
    END IF;
    RETURN NEXT;
END;
$$;
