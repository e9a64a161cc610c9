-- pgque.rotate_metadata(): keep the tick and subscription tables small and
-- free of dead tuples while some session holds the xmin horizon.
-- Subscriptions (updated per batch), first: pgque.rotate_family
-- ('subscription') - when the current child holds garbage (updated since
-- its rows moved in and grown past the pages its live rows need, which
-- happens when a held xmin stops HOT pruning) and the rotation period
-- passed, it grew by meta_rotation_max_pages, or 150 transaction ids were
-- assigned since its rows moved in, its rows move to the next child and
-- the old child is TRUNCATEd in the same transaction; stranded rows of a
-- non-current child are moved back and that child truncated. Its children
-- are locked in partition order in one subtransaction: a timeout releases
-- all of them at once, so consumers never wait on a lock the rotation
-- keeps after giving up.
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
-- One caller at a time (advisory (pgque.lock_id_class(), pgque.lock_id_metadata_rotation()), try-lock: others return 0).
-- Returns: actions taken. Locks: ACCESS EXCLUSIVE on a subscription child
-- being moved from and truncated; ACCESS EXCLUSIVE on a tick child being
-- truncated, EXCLUSIVE on one being moved from. Writes: tick, subscription.
-- Then the broker's tables: group_rotate() (the group cursors through the
-- same rotate_family, and dedup), under the same wait; its misses count
-- for the back-off (not called on a backed-off call).
-- Idle calls: a call that would find what the previous one of the session
-- found (nothing committed anywhere, no time slot turned, nothing waiting
-- for time) returns 0 at once (session setting pgque.rotation_idle).
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
    v_timeout   text := current_setting('lock_timeout');
    v_done      int := 0;
    v_cur       smallint;
    v_x         smallint;
    v_tbl       text;
    v_total     bigint;
    v_needed    bigint;
    v_misses    int;
    v_wait_ms   int;
    v_missed    boolean := false;
    v_key       text;
    v_idle      text;
BEGIN
    -- One rotation at a time (ticker_loop, cron and the daemon may all call
    -- it): a second caller returns at once instead of racing for the locks.
    IF NOT pg_try_advisory_xact_lock(pgque.lock_id_class(), pgque.lock_id_metadata_rotation()) THEN
        RETURN 0;
    END IF;
    -- Back-off after calls that gave up on a busy table (this session's
    -- pgque.rotation_misses / pgque.rotation_retry_at; writes nothing): the
    -- wait doubles, and from the second miss on the next attempt waits 3
    -- times as long as the last one did, so consumers spend at most ~1/4 of
    -- their time queued behind a rotation that cannot get its lock (a
    -- transaction holding the table for long).
    -- The idle path: a call that found nothing to do records the cluster's
    -- snapshot (which transactions had committed), the tick and dedup
    -- tables' time slots, and the earliest time at which something it
    -- looked at falls due by time alone (pgque.rotation_until: a dirty
    -- child reaching its rotation period, a dedup child leaving the
    -- window). While the snapshot and the slots are the same - nothing was
    -- written anywhere, no slot turned - and that time has not come, this
    -- call would find the same: it returns 0 at once. Not recorded after a
    -- call that acted or missed a lock. Session setting
    -- pgque.rotation_idle: '<key>|<until, epoch seconds>'.
    v_key := pg_current_snapshot()::text || '@' || pgque.tick_gen(now()) || '@' || pgque.dedup_gen(now());
    v_idle := current_setting('pgque.rotation_idle', true);
    IF split_part(v_idle, '|', 1) = v_key
       AND extract(epoch FROM clock_timestamp()) < split_part(v_idle, '|', 2)::float8 THEN
        RETURN 0;
    END IF;
    PERFORM set_config('pgque.rotation_until', 'Infinity', true);
    v_misses := coalesce(nullif(current_setting('pgque.rotation_misses', true), '')::int, 0);
    IF v_misses > 0 AND extract(epoch FROM clock_timestamp()) * 1000
         < coalesce(nullif(current_setting('pgque.rotation_retry_at', true), '')::float8, 0) THEN
        RETURN 0;
    END IF;
    v_wait_ms := 20 << least(v_misses, 3);
    PERFORM set_config('lock_timeout', v_wait_ms || 'ms', true);

    -- Subscriptions (rotate_family: the algorithm shared with the broker's
    -- group cursors), in a subtransaction: a timeout releases its locks.
    -- Rotate after 150 transaction ids: well inside the 500 dead tuples
    -- the table is allowed.
    BEGIN
        v_done := v_done + pgque.rotate_family('subscription', 30, 150);
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

    -- The broker's group-cursor and dedup tables (sql/broker/340_group_rotate.sql),
    -- last (a broker pop reads the tick table before its cursors), under
    -- the same lock wait; it reports a miss in pgque.rotation_missed.
    PERFORM set_config('pgque.rotation_missed', '', true);
    v_done := v_done + pgque.group_rotate();
    v_missed := v_missed OR current_setting('pgque.rotation_missed', true) = 'true';

    PERFORM set_config('pgque.rotation_idle',
                       CASE WHEN v_done = 0 AND NOT v_missed
                            THEN v_key || '|' || current_setting('pgque.rotation_until') ELSE '' END, false);
    PERFORM set_config('pgque.rotation_misses', CASE WHEN v_missed THEN least(v_misses + 1, 3) ELSE 0 END::text, false);
    IF v_missed AND v_misses > 0 THEN
        PERFORM set_config('pgque.rotation_retry_at', (extract(epoch FROM clock_timestamp()) * 1000 + 3 * v_wait_ms)::text, false);
    END IF;
    PERFORM set_config('lock_timeout', v_timeout, true);
    RETURN v_done;
END;
$$;
