-- pgque.start(): register pgque's pg_cron jobs (cron_jobs) when pg_cron is
-- installed in this database, replacing earlier versions of them (pg_cron's
-- schedule() updates a job of the same name), and removing jobs of ours the
-- version does not want; lets ticker_loop() run (set_cron_version). When pg_cron lives in another
-- database, pgquectl tick registers the jobs from there.
-- Returns: jobs registered. Locks: cron.job rows. Writes: cron.job, settings.
-- Called by: pgquectl tick, administrators.
--
-- pgque.stop(): stop ticking through pg_cron: set ticker_loop_enabled to
-- false, so a running ticker_loop() (and a run waiting to take over) ends
-- within one round, and unregister exactly this database's jobs (names in
-- cron_job_names(), matched exactly) when pg_cron lives in this database;
-- otherwise pgquectl tick --off removes them in the cron database.
-- Returns: jobs removed. Locks: cron.job rows, the settings row.
-- Writes: cron.job, settings. Called by: pgquectl tick --off, uninstall,
-- administrators.
CREATE OR REPLACE FUNCTION pgque.start()
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_version text;
    v_job     record;
    v_n       int := 0;
BEGIN
    SELECT extversion INTO v_version FROM pg_catalog.pg_extension WHERE extname = 'pg_cron';
    IF v_version IS NULL THEN
        RAISE EXCEPTION 'pgque: pg_cron is not installed in database %', current_database()
            USING ERRCODE = 'raise_exception',
                  HINT = 'If pg_cron runs in another database (SHOW cron.database_name), run "pgquectl tick", which registers the jobs from there; without pg_cron run "pgquectl tick --run".';
    END IF;
    PERFORM pgque.set_cron_version(v_version);
    FOR v_job IN SELECT * FROM pgque.cron_jobs(v_version) LOOP
        EXECUTE 'SELECT cron.schedule($1, $2, $3)' USING v_job.jobname, v_job.schedule, v_job.command;
        v_n := v_n + 1;
    END LOOP;
    EXECUTE 'SELECT count(cron.unschedule(jobid)) FROM cron.job WHERE jobname::text = ANY ($1) AND NOT jobname::text = ANY ($2)'
       USING pgque.cron_job_names(), ARRAY(SELECT j.jobname FROM pgque.cron_jobs(v_version) j);
    RETURN v_n;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.stop()
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_n int;
BEGIN
    PERFORM pgque.set_setting('ticker_loop_enabled', 'false');
    IF to_regclass('cron.job') IS NULL THEN
        RETURN 0;
    END IF;
    EXECUTE 'SELECT count(cron.unschedule(jobid)) FROM cron.job WHERE jobname::text = ANY ($1)'
       INTO v_n USING pgque.cron_job_names();
    RETURN v_n;
END;
$$;
