-- pgque.maint_rotate_tables_step1(i_queue_name): switch the queue's inserts
-- to its next event table once rotation_period has passed (at least
-- completedRetentionSeconds with retentionEnabled: queue_min_rotation), the previous
-- switch is confirmed (step 2) and no consumer can still need that table
-- (the slowest cursor's tick - classic consumers - and the oldest consumer
-- group range (group_rotation_pin) have an xmin above the previous step 2 txid).
-- The next table is TRUNCATEd first (NOWAIT: busy means try again later).
-- Returns: 1 switched, 0 not (yet). Locks: the queue's tick lock (try), the
-- queue row, the next event table (ACCESS EXCLUSIVE NOWAIT).
-- Writes: queue, message_tombstone (the truncated table's rows), truncates an
-- event table. Called by: maint(), the daemon.
CREATE OR REPLACE FUNCTION pgque.maint_rotate_tables_step1(i_queue_name text)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue := pgque.find_queue(i_queue_name);
    v_next  int;
BEGIN
    -- Cheap checks first: most calls find nothing due and write nothing.
    IF v_queue.queue_switch_step2 IS NULL
       OR now() - v_queue.queue_switch_time < greatest(v_queue.queue_rotation_period,
                                                       pgque.queue_min_rotation(v_queue.queue_options)) THEN
        RETURN 0;
    END IF;
    IF NOT pg_try_advisory_xact_lock(pgque.lock_id_queue_tick_class(), v_queue.queue_id) THEN
        RETURN 0;
    END IF;
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = v_queue.queue_id FOR UPDATE;
    IF v_queue.queue_switch_step2 IS NULL
       OR now() - v_queue.queue_switch_time < greatest(v_queue.queue_rotation_period,
                                                       pgque.queue_min_rotation(v_queue.queue_options)) THEN
        RETURN 0;
    END IF;
    -- A cursor whose tick's xmin is not above step 2 may still need the
    -- table (EXISTS, not min(): min(xid8) only exists from PostgreSQL 15);
    -- so may a consumer group's cursor (group_rotation_pin, 98_44).
    IF EXISTS (SELECT 1
                 FROM pgque.tick_need() n
                 JOIN pgque.tick t ON t.tick_queue = n.queue_id AND t.tick_id = n.cursor_tick
                WHERE n.queue_id = v_queue.queue_id
                  AND pg_snapshot_xmin(t.tick_snapshot) <= v_queue.queue_switch_step2)
       OR pgque.group_rotation_pin(v_queue.queue_id, v_queue.queue_switch_step2) <= v_queue.queue_switch_step2 THEN
        RETURN 0;
    END IF;
    v_next := (v_queue.queue_cur_table + 1) % v_queue.queue_ntables;
    BEGIN
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE NOWAIT', pgque.event_table(v_queue.queue_id, v_next));
    EXCEPTION WHEN lock_not_available THEN
        RETURN 0;
    END;
    EXECUTE format('TRUNCATE %s', pgque.event_table(v_queue.queue_id, v_next));
    -- deleted-message marks of the events just truncated (98_70)
    DELETE FROM pgque.message_tombstone WHERE mt_queue = v_queue.queue_id AND mt_table = v_next;
    UPDATE pgque.queue
       SET queue_cur_table = v_next, queue_switch_step1 = pg_current_xact_id(),
           queue_switch_step2 = NULL, queue_switch_time = now()
     WHERE queue_id = v_queue.queue_id;
    RETURN 1;
END;
$$;
