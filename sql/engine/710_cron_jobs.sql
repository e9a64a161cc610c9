-- pgque.cron_jobs(i_cron_version): the pg_cron jobs this engine wants, for a
-- pg_cron version ('1.4.2', '1.6.4', ...). Two jobs run ticker_loop(): one
-- ticks while the other's run waits on the loop lock to take over the
-- moment the first ends, warmed up (see ticker_loop). On >= 1.5 both on
-- '1 seconds' (pg_cron restarts a job within a second of its run ending).
-- Older versions have minute schedules only: the two ticker jobs alternate
-- minutes ('*/2' and '1-59/2'), so that each minute one run starts, stands
-- by and takes over 1.5 s past the minute from the run of the minute
-- before. On every version there are no maintenance jobs: ticker_loop()
-- runs pgque.maint() between its rounds (ticker_maint_ms, set_cron_version)
-- and already rotates the metadata every 100 ms, runs step 2 every second
-- and moves due retries every round. Maintenance jobs would each start a
-- backend (on >= 1.5 one every ~1.6 s: '5 seconds' and '10 seconds'
-- schedules) whose start-up competes with the loop for the CPU, and whose
-- rotate_metadata() competes with the loop's own: the pg_cron 1.6 headline
-- bench's tick gaps over 50 ms sat on such starts. The only other job is the
-- hourly purge of pgque's cron.job_run_details rows.
-- Job names are those of cron_job_names() (the one list of names that are
-- ours; it keeps the names of the maintenance jobs older versions
-- registered, so that pgquectl tick and stop() remove them).
-- run_in_cron_db: the job's command belongs to the cron database (the purge
-- of pgque's cron.job_run_details rows, by exact job name), not to the
-- engine's.
-- Locks: none. Called by: start(), pgquectl tick (internal/cron).
CREATE OR REPLACE FUNCTION pgque.cron_jobs(i_cron_version text)
RETURNS TABLE (jobname text, schedule text, command text, run_in_cron_db boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_seconds boolean;
    v_suffix  text := pgque.cron_job_suffix();
BEGIN
    IF i_cron_version IS NULL OR i_cron_version !~ '^\d+\.\d+' THEN
        RAISE EXCEPTION 'pgque: pg_cron version "%" is not a version number', i_cron_version
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_seconds := (regexp_match(i_cron_version, '^(\d+)\.(\d+)'))::int[] >= ARRAY[1, 5];
    RETURN QUERY
    SELECT j.* FROM (VALUES
        ('pgque_ticker' || v_suffix, CASE WHEN v_seconds THEN '1 seconds' ELSE '*/2 * * * *' END,
         'CALL pgque.ticker_loop()', false),
        ('pgque_ticker_2' || v_suffix, CASE WHEN v_seconds THEN '1 seconds' ELSE '1-59/2 * * * *' END,
         'CALL pgque.ticker_loop()', false),
        ('pgque_cron_purge' || v_suffix, '17 * * * *',
         format('DELETE FROM cron.job_run_details d USING cron.job j WHERE d.jobid = j.jobid AND j.jobname::text = ANY (%L::text[]) AND d.end_time < now() - %L::interval',
                pgque.cron_job_names(), coalesce(pgque.get_setting('cron_run_retention'), '1 day')),
         true)) AS j (jobname, schedule, command, run_in_cron_db);
END;
$$;
