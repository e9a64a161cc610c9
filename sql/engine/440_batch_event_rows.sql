-- pgque.batch_event_rows(i_sub, i_after, i_limit, i_ev_id): the events of
-- the subscription's open batch (ticks sub_last_tick .. sub_next_tick), i.e.
-- rows whose transaction is visible in the end tick's snapshot and not in
-- the start tick's, owned by nobody or by this subscription; ordered by
-- ev_id, after ev_id i_after (NULL: from the start), at most i_limit rows
-- (NULL: all), only ev_id = i_ev_id when given.
-- The txid range is scanned from xmax(start) to xmax(end) plus the start
-- snapshot's in-progress xids by equality, so a held xmin does not widen it.
-- Tables: only the previous event table when the batch ends before the last
-- switch; only the current one when it starts after the switch was
-- confirmed (step 2); else both.
-- Locks: none (reads). Called by: receive, get_batch_events, nack, ack.
CREATE OR REPLACE FUNCTION pgque.batch_event_rows(i_sub pgque.subscription, i_after bigint,
                                                  i_limit int, i_ev_id bigint DEFAULT NULL)
RETURNS TABLE (ev_id bigint, ev_time timestamptz, ev_txid xid8, ev_owner int, ev_retry int,
               ev_type text, ev_data text, ev_extra1 text, ev_extra2 text, ev_extra3 text,
               ev_extra4 text, ev_partition int)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue  pgque.queue;
    v_lsnap  pg_snapshot;
    v_csnap  pg_snapshot;
    v_tables int[];
    v_prev   int;
    v_n      int;
    v_parts  text[] := '{}';
    v_sql    text;
BEGIN
    IF i_sub.sub_batch IS NULL THEN
        RETURN;
    END IF;
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_sub.sub_queue;
    SELECT tick_snapshot INTO v_lsnap FROM pgque.tick
     WHERE tick_queue = i_sub.sub_queue AND tick_id = i_sub.sub_last_tick;
    SELECT tick_snapshot INTO v_csnap FROM pgque.tick
     WHERE tick_queue = i_sub.sub_queue AND tick_id = i_sub.sub_next_tick;
    IF v_lsnap IS NULL OR v_csnap IS NULL THEN
        RAISE EXCEPTION 'pgque: ticks % .. % of batch % are missing', i_sub.sub_last_tick, i_sub.sub_next_tick, i_sub.sub_batch
            USING ERRCODE = 'internal_error';
    END IF;

    v_prev := (v_queue.queue_cur_table + v_queue.queue_ntables - 1) % v_queue.queue_ntables;
    IF pg_snapshot_xmax(v_csnap) < v_queue.queue_switch_step1 THEN
        v_tables := ARRAY[v_prev];
    ELSIF v_queue.queue_switch_step2 IS NOT NULL AND pg_snapshot_xmin(v_lsnap) > v_queue.queue_switch_step2 THEN
        v_tables := ARRAY[v_queue.queue_cur_table];
    ELSE
        v_tables := ARRAY[v_queue.queue_cur_table, v_prev];
    END IF;

    FOREACH v_n IN ARRAY v_tables LOOP
        v_parts := v_parts || format(
            'SELECT e.ev_id, e.ev_time, e.ev_txid, e.ev_owner, e.ev_retry, e.ev_type, e.ev_data, '
            'e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4, e.ev_partition FROM %s e '
            'WHERE ((e.ev_txid >= $1 AND e.ev_txid < $2) OR e.ev_txid = ANY ($3)) '
            'AND pg_visible_in_snapshot(e.ev_txid, $4) AND NOT pg_visible_in_snapshot(e.ev_txid, $5) '
            'AND (e.ev_owner IS NULL OR e.ev_owner = $6) '
            'AND ($7::bigint IS NULL OR e.ev_id > $7) AND ($8::bigint IS NULL OR e.ev_id = $8)',
            pgque.event_table(v_queue.queue_id, v_n));
    END LOOP;
    v_sql := 'SELECT * FROM (' || array_to_string(v_parts, ' UNION ALL ') || ') b ORDER BY b.ev_id LIMIT $9';
    RETURN QUERY EXECUTE v_sql
        USING pg_snapshot_xmax(v_lsnap), pg_snapshot_xmax(v_csnap),
              ARRAY(SELECT pg_snapshot_xip(v_lsnap)), v_csnap, v_lsnap,
              i_sub.sub_id, i_after, i_ev_id, i_limit;
END;
$$;
