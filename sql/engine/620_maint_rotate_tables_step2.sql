-- pgque.maint_rotate_tables_step2(): confirm every pending table switch by
-- recording a txid of this (later) transaction. Must run in a transaction
-- after step 1's committed. Returns: queues confirmed. Locks: those queue
-- rows. Writes: queue. Called by: ticker_loop(), maint(), cron, the daemon.
CREATE OR REPLACE FUNCTION pgque.maint_rotate_tables_step2()
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_n int;
BEGIN
    -- Check first: taking a txid when nothing is pending would cost WAL.
    IF NOT EXISTS (SELECT 1 FROM pgque.queue WHERE queue_switch_step2 IS NULL) THEN
        RETURN 0;
    END IF;
    UPDATE pgque.queue SET queue_switch_step2 = pg_current_xact_id()
     WHERE queue_switch_step2 IS NULL AND queue_switch_step1 < pg_current_xact_id();
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
