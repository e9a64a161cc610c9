-- pgque.cron_job_names(): every pg_cron job name that is this database's
-- engine's: 'pgque_<what>' || cron_job_suffix() for each job cron_jobs() can
-- register on any pg_cron version. The one answer to "which pg_cron jobs are
-- ours": pgque.stop(), pgquectl tick / status / uninstall match job names
-- exactly against it (never with LIKE: '_' and '%' are legal in database
-- names). Names fit pg_cron's 63-byte job names as they are.
-- Returns: text[]. Locks: none. Called by: cron_jobs, stop, pgquectl.
CREATE OR REPLACE FUNCTION pgque.cron_job_names()
RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT array_agg('pgque_' || w || pgque.cron_job_suffix() ORDER BY w)
      FROM unnest(ARRAY['ticker', 'ticker_2', 'maint', 'retry', 'rotate_step2', 'rotate_meta', 'cron_purge']) AS w;
$$;
