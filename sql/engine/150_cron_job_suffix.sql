-- pgque.cron_job_suffix(): the end of pgque's pg_cron job names in this
-- database: '@<database>', or for a database name too long for pg_cron's
-- 63-byte job names '@<first 30 bytes>~<8 hex digits of its md5>'.
-- Job names are 'pgque_<what>' || this. Locks: none.
-- Called by: cron_jobs, stop, status, pgquectl (uninstall, status).
CREATE OR REPLACE FUNCTION pgque.cron_job_suffix()
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_db   text := current_database();
    v_head text;
BEGIN
    IF octet_length(v_db) <= 40 THEN
        RETURN '@' || v_db;
    END IF;
    v_head := left(v_db, 30);
    WHILE octet_length(v_head) > 30 LOOP  -- multibyte characters
        v_head := left(v_head, -1);
    END LOOP;
    RETURN '@' || v_head || '~' || left(md5(v_db), 8);
END;
$$;
