-- pgque.unread_events(i_queue_id, i_tick_id): how many events of the queue
-- a cursor at tick i_tick_id has still to read (retries not included):
--   event ids allocated after the tick (an upper bound: rolled-back ids
--   count too), plus
--   committed events whose id the tick already counted but whose
--   transaction it did not see (it committed after the tick): counted
--   exactly, by probing the ev_txid index for the tick's in-progress xids
--   and the txids from its xmax up to the next tick's xmax. Retried events
--   moved back (ev_retry set) are left out there: maint_retry_events
--   advances the event sequence by the rows it moves, so the first term
--   counts them already.
-- So a committed event never shows as 0 pending just because it committed
-- after the tick that numbered it. NULL when the queue or tick is unknown.
-- Returns: bigint. Locks: none (reads). Called by: get_queue_info,
-- get_consumer_info (pending_events), pgquectl uninstall (through them).
CREATE OR REPLACE FUNCTION pgque.unread_events(i_queue_id int, i_tick_id bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_snap  pg_snapshot;
    v_seq   bigint;
    v_upto  xid8;
    v_late  bigint := 0;
    v_n     bigint;
    v_t     int;
BEGIN
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    SELECT t.tick_snapshot, t.tick_event_seq INTO v_snap, v_seq
      FROM pgque.tick t WHERE t.tick_queue = i_queue_id AND t.tick_id = i_tick_id;
    IF v_queue.queue_id IS NULL OR v_snap IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT pg_snapshot_xmax(t.tick_snapshot) INTO v_upto
      FROM pgque.tick t WHERE t.tick_queue = i_queue_id AND t.tick_id > i_tick_id
     ORDER BY t.tick_id LIMIT 1;
    FOR v_t IN 0 .. v_queue.queue_ntables - 1 LOOP
        EXECUTE format('SELECT count(*) FROM %s e '
                       'WHERE (e.ev_txid = ANY ($1) OR (e.ev_txid >= $2 AND ($3::xid8 IS NULL OR e.ev_txid < $3))) '
                       'AND e.ev_id <= $4 AND e.ev_retry IS NULL AND NOT pg_visible_in_snapshot(e.ev_txid, $5)',
                       pgque.event_table(i_queue_id, v_t))
           INTO v_n
          USING ARRAY(SELECT pg_snapshot_xip(v_snap)), pg_snapshot_xmax(v_snap), v_upto, v_seq, v_snap;
        v_late := v_late + v_n;
    END LOOP;
    RETURN greatest(coalesce(pg_sequence_last_value(v_queue.queue_event_seq), 0) - v_seq, 0) + v_late;
END;
$$;
