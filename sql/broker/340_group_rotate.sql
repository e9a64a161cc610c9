-- pgque.group_rotate(): keep the group-cursor and dedup tables small while
-- some session holds the xmin horizon (rotate_metadata calls it last).
-- Group cursors (updated per pop and ack): pgque.rotate_family
-- ('group_cursor'), the subscription table's algorithm - the current
-- child's rows move to the next child and the old child is TRUNCATEd in
-- the same transaction under one ACCESS EXCLUSIVE lock taken in partition
-- order; stranded rows of a non-current child are moved back and that
-- child truncated. Budget: 50 transaction ids since the rows moved in.
-- Dedup (insert-only): a non-current child is TRUNCATEd once its newest row
-- is older than the longest dedup window of any queue.
-- One rotation at a time: advisory (pgque.lock_id_class(), pgque.lock_id_metadata_rotation()), try-lock (rotate_metadata
-- holds it already; another caller returns 0). Lock waits: the caller's
-- lock_timeout when it set one (rotate_metadata: 20 ms, doubled after
-- misses up to 160 ms), else 20 ms; the group cursors wait at least 100 ms:
-- a group pop holds its cursor rows for a whole function call, longer than
-- a classic receive, and with 16 busy consumers on a loaded 2-core machine
-- shorter waits gave up on most attempts (peak dead tuples over 500; at
-- 100 ms and a budget of 50 they stayed under 400). Each part runs in its
-- own subtransaction, so a timeout releases that part's locks at once; a
-- part that gave up sets pgque.rotation_missed to 'true' for the
-- transaction (rotate_metadata's back-off counts it).
-- Returns: actions taken. Locks: ACCESS EXCLUSIVE on the cursor and dedup
-- children worked on. Writes: group_cursor, dedup.
-- Called by: rotate_metadata, tests.
CREATE OR REPLACE FUNCTION pgque.group_rotate()
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_timeout text := current_setting('lock_timeout');
    v_done    int := 0;
    v_cur     smallint;
    v_x       smallint;
    v_tbl     text;
    v_newest  timestamptz;
    v_window  int;
    v_wait_ms int;
BEGIN
    IF NOT pg_try_advisory_xact_lock(pgque.lock_id_class(), pgque.lock_id_metadata_rotation()) THEN
        RETURN 0;
    END IF;
    -- The caller's wait (rotate_metadata's back-off), else 20 ms.
    v_wait_ms := CASE WHEN v_timeout IN ('0', '0ms') THEN 20
                      ELSE extract(epoch FROM v_timeout::interval) * 1000 END;
    PERFORM set_config('lock_timeout', v_wait_ms || 'ms', true);

    -- Group cursors: budget 50 transaction ids (a third of the
    -- subscriptions'), a wait of at least 100 ms (see above).
    BEGIN
        IF v_wait_ms < 100 THEN
            PERFORM set_config('lock_timeout', '100ms', true);
        END IF;
        v_done := v_done + pgque.rotate_family('group_cursor', 20, 50);
        PERFORM set_config('lock_timeout', v_wait_ms || 'ms', true);
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        PERFORM set_config('pgque.rotation_missed', 'true', true);
    END;

    -- Dedup: truncate a non-current child whose rows are all out of window.
    v_cur := pgque.dedup_gen(now());
    SELECT max(coalesce((q.queue_options ->> 'dedup_window')::int, 3600)) INTO v_window FROM pgque.queue q;
    FOR v_x IN SELECT g FROM generate_series(0, 2) g WHERE g <> v_cur ORDER BY g LOOP
        v_tbl := format('pgque.%I', 'dedup_' || v_x);
        BEGIN
            CONTINUE WHEN pg_relation_size(v_tbl::regclass) = 0;
            EXECUTE format('SELECT max(dd_time) FROM %s', v_tbl) INTO v_newest;
            IF v_newest IS NOT NULL AND v_newest > now() - make_interval(secs => coalesce(v_window, 3600)) THEN
                -- Out of window then (rotate_metadata's idle path).
                PERFORM pgque.rotation_due_at(v_newest + make_interval(secs => coalesce(v_window, 3600)));
                CONTINUE;
            END IF;
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', v_tbl);
            EXECUTE format('SELECT max(dd_time) FROM %s', v_tbl) INTO v_newest;
            CONTINUE WHEN v_newest IS NOT NULL AND v_newest > now() - make_interval(secs => coalesce(v_window, 3600));
            EXECUTE format('TRUNCATE %s', v_tbl);
            v_done := v_done + 1;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            PERFORM set_config('pgque.rotation_missed', 'true', true);
        END;
    END LOOP;

    PERFORM set_config('lock_timeout', v_timeout, true);
    RETURN v_done;
END;
$$;
