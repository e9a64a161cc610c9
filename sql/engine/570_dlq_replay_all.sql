-- pgque.dlq_replay_all(i_queue_name): replay every dead letter of a queue,
-- each in its own subtransaction so one failure does not stop the rest.
-- Returns: replayed, failed, first_error. Locks/writes: as dlq_replay.
-- Called by: operators.
CREATE OR REPLACE FUNCTION pgque.dlq_replay_all(i_queue_name text, OUT replayed bigint, OUT failed bigint, OUT first_error text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_id bigint;
BEGIN
    replayed := 0;
    failed := 0;
    FOR v_id IN
        SELECT d.dl_id FROM pgque.dead_letter d
         WHERE d.dl_queue_id = (pgque.find_queue(i_queue_name)).queue_id
         ORDER BY d.dl_id
    LOOP
        BEGIN
            PERFORM pgque.dlq_replay(v_id);
            replayed := replayed + 1;
        EXCEPTION WHEN OTHERS THEN
            failed := failed + 1;
            first_error := coalesce(first_error, SQLERRM);
        END;
    END LOOP;
END;
$$;
