-- pgque.has_events_since(i_queue_id, i_snapshot): whether the queue's event
-- tables hold a committed row that i_snapshot does not see - one the next
-- tick would carry. An index probe on ev_txid: the range from the
-- snapshot's xmax up, plus equality on its in-progress xids that have ended
-- since (never from xmin, which a held horizon makes old: the probe stays a
-- few index descents however long another transaction runs). The calling
-- transaction's own rows are left out (its own tick could not see them).
-- Index probes only (two per event table, each an index condition, and
-- enable_seqscan off for them, restored after):
-- "LIMIT 1" over a condition the planner guesses matches a third of the
-- rows made it choose a sequential scan wherever the event table had no
-- fresh statistics (never analyzed, or analyzed when small) - and when
-- nothing matches, the usual answer, that reads every row: ~100 ms of CPU
-- in due_queues for a table of 400,000 events, a tick stall seen in the
-- 10-minute benchmark under a held xmin (bench/sub-second, 2026-12-02).
-- Reads only: no write, no WAL.
-- Returns: boolean. Locks: AccessShareLock on the event tables.
-- Called by: due_queues, for a last tick recorded with tick_wait_probe.
CREATE OR REPLACE FUNCTION pgque.has_events_since(i_queue_id int, i_snapshot pg_snapshot)
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_now   pg_snapshot := pgque.tick_snapshot();
    v_ended xid8[];
    v_parts text[] := '{}';
    v_found boolean;
    v_seq   text := current_setting('enable_seqscan');
BEGIN
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    v_ended := ARRAY(SELECT x FROM pg_snapshot_xip(i_snapshot) x WHERE pg_visible_in_snapshot(x, v_now));
    FOR n IN 0 .. v_queue.queue_ntables - 1 LOOP
        -- Two probes per table, each an index condition (an OR of the two
        -- was a filter over a scan of the whole ev_txid index).
        v_parts := v_parts
            || format('(SELECT 1 FROM %s e WHERE e.ev_txid >= $1 AND e.ev_txid IS DISTINCT FROM $3 LIMIT 1)',
                      pgque.event_table(i_queue_id, n))
            || format('(SELECT 1 FROM %s e WHERE e.ev_txid = ANY ($2) AND e.ev_txid IS DISTINCT FROM $3 LIMIT 1)',
                      pgque.event_table(i_queue_id, n));
    END LOOP;
    PERFORM set_config('enable_seqscan', 'off', true);
    EXECUTE 'SELECT EXISTS (' || array_to_string(v_parts, ' UNION ALL ') || ')'
       INTO v_found
      USING pg_snapshot_xmax(i_snapshot), v_ended, pg_current_xact_id_if_assigned();
    PERFORM set_config('enable_seqscan', v_seq, true);
    RETURN v_found;
END;
$$;
