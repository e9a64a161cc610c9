-- pgque.rotate_metadata(): keep the tick and subscription tables small and
-- free of dead tuples while some session holds the xmin horizon.
-- Ticks (insert-only, child by time slot, see tick_gen): the child that
-- becomes current next is TRUNCATEd when none of its ticks is needed
-- (tick_need); when few of many are needed, those are moved to the current
-- child first and the truncate follows in a later call.
-- Subscriptions (updated per batch): (a) every non-current child with pages
-- is TRUNCATEd (live rows stranded there by a racing registration are moved
-- to the current child first); (b) when the current child holds garbage -
-- it was updated since its rows moved in and has grown past the pages its
-- live rows need, which happens when a held xmin stops HOT pruning - and
-- either meta_rotation_ms() has passed or it has grown by
-- meta_rotation_max_pages, its rows move to the next child, which becomes
-- current. (a) of a child always runs in a later call than (b).
-- Lock waits are bounded (5 ms); a busy table is skipped until the next call;
-- one caller at a time (advisory (1885827445, 4), try-lock: others return 0).
-- Returns: actions taken. Locks: EXCLUSIVE on a child being moved from,
-- ACCESS EXCLUSIVE on a child being truncated. Writes: tick, subscription.
-- Then the broker's tables: group_rotate().
-- Called by: ticker_loop() (every 200 ms), cron, the ticker daemon.
CREATE OR REPLACE FUNCTION pgque.rotate_metadata()
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    c_need_sql constant text :=
        'SELECT count(*), count(*) FILTER (WHERE t.tick_id >= n.min_tick) '
        '  FROM %s t LEFT JOIN pgque.tick_need() n ON n.queue_id = t.tick_queue';
    v_timeout   text := current_setting('lock_timeout');
    v_done      int := 0;
    v_period_ms int := pgque.meta_rotation_ms();
    v_max_pages int := coalesce(pgque.get_setting('meta_rotation_max_pages')::int, 4);
    v_cur       smallint;
    v_x         smallint;
    v_tbl       text;
    v_total     bigint;
    v_needed    bigint;
    v_live      bigint;
    v_oldest    timestamptz;
    v_dirty     boolean;
    v_pages     bigint;
    v_live_pages int;
BEGIN
    -- One rotation at a time (ticker_loop, cron and the daemon may all call
    -- it): a second caller returns at once instead of racing for the locks.
    IF NOT pg_try_advisory_xact_lock(1885827445, 4) THEN
        RETURN 0;
    END IF;
    PERFORM set_config('lock_timeout', '5ms', true);

    -- Ticks.
    v_cur := pgque.tick_gen(now());
    v_x := (v_cur + 1) % 3;
    v_tbl := format('pgque.%I', 'tick_' || v_x);
    BEGIN
    IF pg_relation_size(v_tbl::regclass) > 0 THEN
        BEGIN
            EXECUTE format(c_need_sql, v_tbl) INTO v_total, v_needed;
            IF v_needed = 0 THEN
                EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', v_tbl);
                EXECUTE format(c_need_sql, v_tbl) INTO v_total, v_needed;
                IF v_needed = 0 THEN
                    EXECUTE format('TRUNCATE %s', v_tbl);
                    v_done := v_done + 1;
                END IF;
            ELSIF v_total >= 200 AND v_needed * 4 <= v_total THEN
                EXECUTE format('LOCK TABLE %s IN EXCLUSIVE MODE', v_tbl);
                UPDATE pgque.tick t SET tick_gen = v_cur
                  FROM pgque.tick_need() n
                 WHERE t.tick_gen = v_x AND t.tick_queue = n.queue_id AND t.tick_id >= n.min_tick;
                v_done := v_done + 1;
            END IF;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            NULL;
        END;
    END IF;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        NULL;
    END;

    -- Subscriptions, (a): truncate the non-current children.
    v_cur := pgque.subscription_gen();
    FOR v_x IN SELECT g FROM generate_series(0, 2) g WHERE g <> v_cur LOOP
        v_tbl := format('pgque.%I', 'subscription_' || v_x);
        BEGIN
            CONTINUE WHEN pg_relation_size(v_tbl::regclass) = 0;
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', v_tbl);
            UPDATE pgque.subscription SET sub_gen = v_cur, sub_moved_at = now() WHERE sub_gen = v_x;
            EXECUTE format('TRUNCATE %s', v_tbl);
            v_done := v_done + 1;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            NULL;
        END;
    END LOOP;

    -- Subscriptions, (b): move the current child's rows to the next child.
    v_tbl := format('pgque.%I', 'subscription_' || v_cur);
    BEGIN
    EXECUTE format('SELECT count(*), min(sub_moved_at), coalesce(bool_or(sub_active > sub_moved_at), false) FROM %s', v_tbl)
       INTO v_live, v_oldest, v_dirty;
    -- Rows fit ~30 a page at fillfactor 50. A child no bigger than its live
    -- rows need has no garbage worth moving them for (without a held xmin,
    -- HOT pruning keeps it that size), so idle subscriptions cost no WAL.
    v_live_pages := ceil(v_live / 30.0)::int;
    v_pages := pg_relation_size(v_tbl::regclass) / current_setting('block_size')::bigint;
    IF v_dirty
       AND v_pages > v_live_pages + 1
       AND (v_oldest <= now() - make_interval(secs => v_period_ms / 1000.0)
            OR v_pages >= v_max_pages + v_live_pages)
       AND pg_relation_size(format('pgque.%I', 'subscription_' || ((v_cur + 1) % 3))::regclass) = 0
    THEN
        BEGIN
            EXECUTE format('LOCK TABLE %s IN EXCLUSIVE MODE', v_tbl);
            v_x := (nextval('pgque.subscription_gen_seq') % 3)::smallint;
            UPDATE pgque.subscription SET sub_gen = v_x, sub_moved_at = now() WHERE sub_gen = v_cur;
            v_done := v_done + 1;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            NULL;
        END;
    END IF;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        NULL;
    END;

    PERFORM set_config('lock_timeout', v_timeout, true);
    -- The broker's group-cursor and dedup tables (98_40_group_rotate.sql).
    v_done := v_done + pgque.group_rotate();
    RETURN v_done;
END;
$$;
