-- pgque.group_rotate(): keep the group-cursor and dedup tables small while
-- some session holds the xmin horizon (rotate_metadata calls it).
-- Group cursors (updated per pop and ack), like the subscription table:
-- (a) every non-current child with pages is TRUNCATEd (live rows stranded
-- there by a racing seed are moved to the current child first); (b) when
-- the current child holds garbage (updated since its rows moved in, and
-- bigger than its live rows need) and either meta_rotation_ms() has passed
-- or it has grown by meta_rotation_max_pages, its rows move to the next
-- child, which becomes current. (a) of a child runs in a later call than (b).
-- Dedup (insert-only): a non-current child is TRUNCATEd once its newest row
-- is older than the longest dedup window of any queue.
-- Lock waits are bounded (5 ms); a busy table is skipped until the next call.
-- Returns: actions taken. Locks: EXCLUSIVE on a cursor child being moved
-- from, ACCESS EXCLUSIVE on a child being truncated.
-- Writes: group_cursor, dedup. Called by: rotate_metadata.
CREATE OR REPLACE FUNCTION pgque.group_rotate()
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_timeout    text := current_setting('lock_timeout');
    v_done       int := 0;
    v_period_ms  int := pgque.meta_rotation_ms();
    v_max_pages  int := coalesce(pgque.get_setting('meta_rotation_max_pages')::int, 4);
    v_cur        smallint;
    v_x          smallint;
    v_tbl        text;
    v_live       bigint;
    v_oldest     timestamptz;
    v_dirty      boolean;
    v_pages      bigint;
    v_live_pages int;
    v_newest     timestamptz;
    v_window     int;
BEGIN
    PERFORM set_config('lock_timeout', '5ms', true);

    -- Group cursors, (a): truncate the non-current children.
    v_cur := pgque.group_cursor_gen();
    FOR v_x IN SELECT g FROM generate_series(0, 2) g WHERE g <> v_cur LOOP
        v_tbl := format('pgque.%I', 'group_cursor_' || v_x);
        BEGIN
            CONTINUE WHEN pg_relation_size(v_tbl::regclass) = 0;
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', v_tbl);
            UPDATE pgque.group_cursor SET gc_gen = v_cur, gc_moved_at = now() WHERE gc_gen = v_x;
            EXECUTE format('TRUNCATE %s', v_tbl);
            v_done := v_done + 1;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            NULL;
        END;
    END LOOP;

    -- Group cursors, (b): move the current child's rows to the next child.
    v_tbl := format('pgque.%I', 'group_cursor_' || v_cur);
    BEGIN
        EXECUTE format('SELECT count(*), min(gc_moved_at), coalesce(bool_or(gc_active > gc_moved_at), false) FROM %s', v_tbl)
           INTO v_live, v_oldest, v_dirty;
        -- Rows fit ~20 a page at fillfactor 50.
        v_live_pages := ceil(v_live / 20.0)::int;
        v_pages := pg_relation_size(v_tbl::regclass) / current_setting('block_size')::bigint;
        IF v_dirty
           AND v_pages > v_live_pages + 1
           AND (v_oldest <= now() - make_interval(secs => v_period_ms / 1000.0)
                OR v_pages >= v_max_pages + v_live_pages)
           AND pg_relation_size(format('pgque.%I', 'group_cursor_' || ((v_cur + 1) % 3))::regclass) = 0
        THEN
            EXECUTE format('LOCK TABLE %s IN EXCLUSIVE MODE', v_tbl);
            v_x := (nextval('pgque.group_cursor_gen_seq') % 3)::smallint;
            UPDATE pgque.group_cursor SET gc_gen = v_x, gc_moved_at = now() WHERE gc_gen = v_cur;
            v_done := v_done + 1;
        END IF;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        NULL;
    END;

    -- Dedup: truncate a non-current child whose rows are all out of window.
    v_cur := pgque.dedup_gen(now());
    SELECT max(coalesce((q.queue_options ->> 'dedup_window')::int, 3600)) INTO v_window FROM pgque.queue q;
    FOR v_x IN SELECT g FROM generate_series(0, 2) g WHERE g <> v_cur LOOP
        v_tbl := format('pgque.%I', 'dedup_' || v_x);
        BEGIN
            CONTINUE WHEN pg_relation_size(v_tbl::regclass) = 0;
            EXECUTE format('SELECT max(dd_time) FROM %s', v_tbl) INTO v_newest;
            CONTINUE WHEN v_newest IS NOT NULL AND v_newest > now() - make_interval(secs => coalesce(v_window, 3600));
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', v_tbl);
            EXECUTE format('SELECT max(dd_time) FROM %s', v_tbl) INTO v_newest;
            CONTINUE WHEN v_newest IS NOT NULL AND v_newest > now() - make_interval(secs => coalesce(v_window, 3600));
            EXECUTE format('TRUNCATE %s', v_tbl);
            v_done := v_done + 1;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            NULL;
        END;
    END LOOP;

    PERFORM set_config('lock_timeout', v_timeout, true);
    RETURN v_done;
END;
$$;
