-- pgque.rotate_metadata(): keep the tick and subscription tables small and
-- free of dead tuples while some session holds the xmin horizon.
-- Subscriptions (updated per batch), first: when the current child holds
-- garbage - it was updated since its rows moved in and has grown past the
-- pages its live rows need, which happens when a held xmin stops HOT
-- pruning - and either meta_rotation_ms() has passed, it has grown by
-- meta_rotation_max_pages, or 150 transaction ids were assigned since its
-- rows moved in (the update volume, counted without writing: this
-- session's pgque.rotation_xid), its rows move to the next child, which becomes
-- current, and the old child is TRUNCATEd in the same transaction (its
-- garbage is gone at once, no old child waits for a later call). A
-- non-current child that still has pages (live rows stranded there by a
-- registration racing a rotation) gets its rows moved to the current child
-- and is TRUNCATEd too. All subscription children this call works on are
-- locked first, in partition order (0, 1, 2: the order in which a
-- statement on pgque.subscription locks them), in one subtransaction: a timeout
-- releases all of them at once, so consumers never wait on a lock the
-- rotation keeps after giving up.
-- Ticks (insert-only, child by time slot, see tick_gen), second - a
-- consumer locks the subscription before the tick table, so taking them in
-- that order cannot deadlock with one: the child that becomes current next
-- is TRUNCATEd when none of its ticks is needed (tick_need); when few of
-- many are needed, those are moved to the current child first and the
-- truncate follows in a later call.
-- Lock waits are bounded: 20 ms, doubled after each call that gave up on a
-- busy table, up to 160 ms; after a second such call in a row the next
-- attempt comes no sooner than 3 times the wait later (the calls in
-- between return 0). A
-- queued lock waits only for the statements already holding the table
-- (new ones queue behind it), but on a loaded machine a consumer's
-- statement holds it for tens of ms, so a short fixed wait starves the
-- rotation: with 16 consumers polling every 1 ms, 5 ms waits gave up on
-- 70% of the truncates.
-- One caller at a time (advisory (1885827445, 4), try-lock: others return 0).
-- Returns: actions taken. Locks: ACCESS EXCLUSIVE on a subscription child
-- being moved from and truncated; ACCESS EXCLUSIVE on a tick child being
-- truncated, EXCLUSIVE on one being moved from. Writes: tick, subscription.
-- Then the broker's tables: group_rotate() (not on a backed-off call).
-- Called by: ticker_loop() (every 100 ms), cron, the ticker daemon.
CREATE OR REPLACE FUNCTION pgque.rotate_metadata()
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    c_need_sql constant text :=
        'SELECT count(*), count(*) FILTER (WHERE t.tick_id >= n.min_tick) '
        '  FROM %s t LEFT JOIN pgque.tick_need() n ON n.queue_id = t.tick_queue';
    -- Rotate once this many transaction ids were assigned since the rows
    -- moved in: well inside the 500 dead tuples the table is allowed.
    c_xid_budget constant bigint := 150;
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
    v_rotate    boolean;
    v_new       smallint;
    v_gens      smallint[];
    v_misses    int;
    v_wait_ms   int;
    v_xmax      bigint;
    v_mark      text[];
    v_missed    boolean := false;
BEGIN
    -- One rotation at a time (ticker_loop, cron and the daemon may all call
    -- it): a second caller returns at once instead of racing for the locks.
    IF NOT pg_try_advisory_xact_lock(1885827445, 4) THEN
        RETURN 0;
    END IF;
    -- Back-off after calls that gave up on a busy table (this session's
    -- pgque.rotation_misses / pgque.rotation_retry_at; writes nothing): the
    -- wait doubles, and from the second miss on the next attempt waits 3
    -- times as long as the last one did, so consumers spend at most ~1/4 of
    -- their time queued behind a rotation that cannot get its lock (a
    -- transaction holding the table for long).
    v_misses := coalesce(nullif(current_setting('pgque.rotation_misses', true), '')::int, 0);
    IF v_misses > 0 AND extract(epoch FROM clock_timestamp()) * 1000
         < coalesce(nullif(current_setting('pgque.rotation_retry_at', true), '')::float8, 0) THEN
        RETURN 0;
    END IF;
    v_wait_ms := 20 << least(v_misses, 3);
    PERFORM set_config('lock_timeout', v_wait_ms || 'ms', true);

    -- Subscriptions: which children to work on.
    v_cur := pgque.subscription_gen();
    v_tbl := format('pgque.%I', 'subscription_' || v_cur);
    BEGIN
        EXECUTE format('SELECT count(*), min(sub_moved_at), coalesce(bool_or(sub_active > sub_moved_at), false) FROM %s', v_tbl)
           INTO v_live, v_oldest, v_dirty;
        -- Rows fit ~30 a page at fillfactor 50. A child no bigger than its
        -- live rows need has no garbage worth moving them for (without a
        -- held xmin, HOT pruning keeps it that size), so idle subscriptions
        -- cost no WAL.
        v_live_pages := ceil(v_live / 30.0)::int;
        v_pages := pg_relation_size(v_tbl::regclass) / current_setting('block_size')::bigint;
        -- Update volume since the rows moved in, counted cheaply: the
        -- transaction ids assigned since then (each consumer write is one;
        -- other writers make it an over-estimate), remembered per session
        -- with the generation it belongs to.
        v_xmax := pg_snapshot_xmax(pg_current_snapshot())::text::bigint;
        v_mark := string_to_array(current_setting('pgque.rotation_xid', true), ':');
        IF cardinality(v_mark) IS DISTINCT FROM 2 OR v_mark[1] <> v_cur::text THEN
            v_mark := ARRAY[v_cur::text, v_xmax::text];
            PERFORM set_config('pgque.rotation_xid', array_to_string(v_mark, ':'), false);
        END IF;
        v_rotate := v_dirty
            AND v_pages > v_live_pages + 1
            AND (v_oldest <= now() - make_interval(secs => v_period_ms / 1000.0)
                 OR v_pages >= v_max_pages + v_live_pages
                 OR v_xmax - v_mark[2]::bigint >= c_xid_budget);
        SELECT coalesce(array_agg(g ORDER BY g), '{}')
          INTO v_gens
          FROM generate_series(0, 2) g
         WHERE (g = v_cur AND v_rotate)
            OR (g <> v_cur AND pg_relation_size(format('pgque.%I', 'subscription_' || g)::regclass) > 0);
        IF cardinality(v_gens) > 0 THEN
            FOREACH v_x IN ARRAY v_gens LOOP
                EXECUTE format('LOCK TABLE pgque.%I IN ACCESS EXCLUSIVE MODE', 'subscription_' || v_x);
            END LOOP;
            v_new := v_cur;
            IF v_rotate THEN
                v_new := (nextval('pgque.subscription_gen_seq') % 3)::smallint;
                PERFORM set_config('pgque.rotation_xid', v_new || ':' || v_xmax, false);
            END IF;
            FOREACH v_x IN ARRAY v_gens LOOP
                CONTINUE WHEN v_x = v_new;
                UPDATE pgque.subscription SET sub_gen = v_new, sub_moved_at = now() WHERE sub_gen = v_x;
                EXECUTE format('TRUNCATE pgque.%I', 'subscription_' || v_x);
                v_done := v_done + 1;
            END LOOP;
        END IF;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        v_missed := true;
    END;

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
            v_missed := true;
        END;
    END IF;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        v_missed := true;
    END;

    PERFORM set_config('pgque.rotation_misses', CASE WHEN v_missed THEN least(v_misses + 1, 3) ELSE 0 END::text, false);
    IF v_missed AND v_misses > 0 THEN
        PERFORM set_config('pgque.rotation_retry_at', (extract(epoch FROM clock_timestamp()) * 1000 + 3 * v_wait_ms)::text, false);
    END IF;
    PERFORM set_config('lock_timeout', v_timeout, true);
    -- The broker's group-cursor and dedup tables (98_40_group_rotate.sql).
    v_done := v_done + pgque.group_rotate();
    RETURN v_done;
END;
$$;
