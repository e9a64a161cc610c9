-- pgque.ticker_loop(): the pg_cron ticker. Ticks every due queue (ticker()),
-- COMMITs after each round - every tick is its own short transaction, so the
-- loop never holds the xmin horizon - and sleeps to the next boundary of the
-- shortest tick period in use (epoch-aligned: no drift; 1 s rounds with
-- classic thresholds, ticker_classic_loop_ms). Every 100 ms it also rotates
-- the tick/subscription tables, every second it confirms event-table switches
-- (step 2); each in its own transaction (first 100 ms / 1 s into a run,
-- so the first round after a handover only ticks). With ticker_maint_ms >
-- 0 (set_cron_version sets 10 s: there are no maintenance jobs) it also
-- runs pgque.maint() that often, the first time 5 s into its hold (away
-- from the handover and the minute boundary), in its own transaction with
-- a 100 ms lock_timeout (maint() skips what is busy; a failure is a
-- WARNING and the loop goes on).
-- Liveness: a run ticks only while it holds the session advisory lock
-- (pgque.lock_id_class(), pgque.lock_id_ticker_loop()) (internal/locks.TickerLoop), from before its first round
-- until it returns; it unlocks explicitly on its way out. A run that finds
-- the lock held stands by: it waits for the lock in 100 ms lock_timeout
-- steps (a fresh snapshot each step, so waiting never holds the xmin
-- horizon back), takes over the moment the holder lets go, and gives up
-- after two slots (pg_cron starts it again); a step whose timeout fires as
-- the lock is granted (PostgreSQL raises the timeout and keeps the grant)
-- counts as taken, and the run releases every hold of the lock on its way
-- out. 1.5 s before the holder's slot
-- ends (or 250 ms in, if that is later) it warms up: a real ticker() round
-- with one queue forced due, rolled back, then rotate_metadata() and step
-- 2, so that its first round after the takeover does not compile and plan
-- the tick path (50-150 ms on a loaded machine). A ticker daemon standing
-- by sees the lock held.
-- Slot and handover: a run that holds the lock ticks to the end of its slot
-- (ticker_slot_seconds, epoch-aligned) plus ticker_overrun_ms (at most half a
-- slot). Two pg_cron jobs run it (cron_jobs): on pg_cron 1.4 they alternate
-- minutes, so the run started at the minute stands by (and warms up) for
-- the overrun; on >= 1.5 ('1 seconds') the other job's run is already
-- waiting. Either way the handover costs the lock hand-off (milliseconds),
-- not a pg_cron start of a cold backend; with slots of 10 s or more
-- the run that handed over lingers 2 s (holding nothing) before it returns,
-- so that pg_cron's next start of its job - a new backend - does not compete
-- with the new holder's first rounds.
-- Idle rounds: a round that ticker_idle() calls idle (nothing committed
-- anywhere since a due check that found nothing, nothing due by time yet;
-- or, with no classic consumer, nothing due by time yet and no ticker_wake
-- row: a queue or setting change, a subscribe) skips ticker_plan(), the
-- retry check and the ticker_loop_enabled read (pgque.stop() commits a
-- ticker_wake row): it costs a snapshot comparison, a read of the empty
-- ticker_wake table and its two COMMITs.
-- Stop: each round that is not idle reads ticker_loop_enabled; 'false'
-- (pgque.stop(), pgquectl tick --off; setting it commits, so the next
-- round is not idle) ends the run - and any run waiting on the lock -
-- within one round.
-- Diagnostics: ticker_debug_round_ms > 0 RAISEs LOG for every round slower
-- than that (from its planned start to the end of its work) with the sleep
-- overshoot and the time in ticker() (split: reading the settings,
-- ticker_plan(), the INSERT and retries), its COMMIT, rotate_metadata() and
-- step 2; queues skipped on a lock timeout are LOGged by ticker() itself,
-- and ticker_plan() LOGs its own slow calls and every due queue it
-- skipped, with why (it reads the session setting
-- pgque.ticker_debug_round_ms, which the loop sets); and
-- every 10 s a summary of all rounds since the last one (count, mean sleep
-- overshoot, mean time in ticker() and in its COMMIT): where the time of an
-- ordinary round goes, the loop's share of the delivery latency. Off (0,
-- the default) it costs one integer comparison a round.
-- Security: runs with the pg_cron job owner's rights (a superuser), SECURITY
-- INVOKER and without a SET clause (PostgreSQL forbids COMMIT otherwise): it
-- first pins the session's search_path to 'pg_catalog, pgque, pg_temp' and
-- schema-qualifies every type, function and operator it uses, so nothing
-- planted in another schema can run in it. A manual CALL leaves that
-- search_path set in the calling session.
-- Durability: the session runs with synchronous_commit = off (set at the
-- start, left set by a manual CALL): a tick's COMMIT does not wait for the
-- WAL flush; anything durable that depends on a tick commits later and
-- flushes it too (docs/design/engine.md, "Asynchronous commit of ticks").
-- Must be called as exactly "CALL pgque.ticker_loop()" outside a transaction
-- block. Locks: the advisory lock above; others as ticker() and
-- rotate_metadata() (and maint()). Writes: as ticker(), rotate_metadata(),
-- maint_rotate_tables_step2() and (ticker_maint_ms > 0) maint(). Called by: pg_cron.
CREATE OR REPLACE PROCEDURE pgque.ticker_loop()
LANGUAGE plpgsql
AS $$
DECLARE
    c_class     constant pg_catalog.int4 := pgque.lock_id_class();
    c_key       constant pg_catalog.int4 := pgque.lock_id_ticker_loop();
    v_start     pg_catalog.timestamptz;
    v_give_up   pg_catalog.timestamptz;
    v_slot      pg_catalog.int4;
    v_overrun   pg_catalog.int4;
    v_deadline  pg_catalog.timestamptz;
    v_period    pg_catalog.int4;
    v_debug     pg_catalog.int4 := 0;
    v_locked    pg_catalog.bool := false;
    v_warm      pg_catalog.bool;
    v_warm_at   pg_catalog.timestamptz;
    v_handed    pg_catalog.bool := false;
    v_wq        pg_catalog.text;
    v_wqid      pg_catalog.int4;
    v_now       pg_catalog.timestamptz;
    v_next      pg_catalog.timestamptz;
    v_next_cfg  pg_catalog.timestamptz;
    v_next_meta pg_catalog.timestamptz;
    v_next_sw   pg_catalog.timestamptz;
    v_maint_ms  pg_catalog.int4 := 0;
    v_next_mnt  pg_catalog.timestamptz;
    -- Diagnostics (ticker_debug_round_ms): when the round was planned to
    -- start, and the end of each phase.
    v_planned   pg_catalog.timestamptz;
    v_t_round   pg_catalog.timestamptz;
    v_t_cfg     pg_catalog.timestamptz;
    v_t_plan    pg_catalog.timestamptz;
    v_t_ticker  pg_catalog.timestamptz;
    v_t_commit  pg_catalog.timestamptz;
    v_t_meta    pg_catalog.timestamptz;
    v_ticks     pg_catalog.int8;
    v_meta      pg_catalog.int4;
    -- The 10 s summary (ticker_debug_round_ms): rounds and summed ms.
    v_n_rounds  pg_catalog.int4 := 0;
    v_s_over    pg_catalog.float8 := 0;
    v_s_tick    pg_catalog.float8 := 0;
    v_s_commit  pg_catalog.float8 := 0;
    v_next_sum  pg_catalog.timestamptz;
    v_plan      pgque.tick[];
    v_timeout   pg_catalog.text;
    v_idle      pg_catalog.bool;
BEGIN
    -- First of all: no name below may resolve through a schema the caller
    -- (or a database default) put on the path.
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pgque, pg_temp', false);
    -- The loop's own transactions (ticks, rotations, step 2) commit without
    -- waiting for their WAL flush: a tick's COMMIT is on the delivery path,
    -- and a flush wait there (tens of ms under I/O load) delays every
    -- consumer. Safe: whatever durable depends on a tick commits after it
    -- and its flush covers the tick too; a crash can lose only ticks that
    -- nothing durable references, and the next round re-ticks (see
    -- docs/design/engine.md, "Asynchronous commit of ticks"). Session-wide, like
    -- the search_path above (a manual CALL leaves both set).
    PERFORM pg_catalog.set_config('synchronous_commit', 'off', false);
    v_timeout := pg_catalog.current_setting('lock_timeout');
    v_start := pg_catalog.clock_timestamp();
    v_slot := coalesce(pgque.get_setting('ticker_slot_seconds')::pg_catalog.int4, 60);
    v_overrun := coalesce(pgque.get_setting('ticker_overrun_ms')::pg_catalog.int4, 1500);
    v_overrun := pg_catalog.int4smaller(v_overrun, v_slot OPERATOR(pg_catalog.*) 500);
    v_give_up := v_start OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_slot OPERATOR(pg_catalog.*) 2);

    -- Take the loop lock, or stand by for it.
    v_locked := pg_catalog.pg_try_advisory_lock(c_class, c_key);
    COMMIT;
    -- A standby warms up (see below) shortly before the running loop's
    -- slot ends - the takeover it prepares for - not when it starts: pg_cron
    -- starts it as the previous run hands over, and the new holder's first
    -- rounds should have the CPU and the locks; and rotations in between
    -- would invalidate plans cached a whole slot earlier.
    -- The holder's slot ends at a slot boundary plus the overrun: the
    -- first such end after this run started.
    v_warm_at := pg_catalog.to_timestamp(
                     pg_catalog.floor(EXTRACT(epoch FROM v_start) OPERATOR(pg_catalog./) v_slot)
                     OPERATOR(pg_catalog.*) v_slot)
                 OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_overrun OPERATOR(pg_catalog./) 1000.0);
    IF v_warm_at OPERATOR(pg_catalog.<=) v_start THEN
        v_warm_at := v_warm_at OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_slot);
    END IF;
    v_warm_at := pg_catalog.timestamptz_larger(v_warm_at OPERATOR(pg_catalog.-) interval '1500 milliseconds',
                                               v_start OPERATOR(pg_catalog.+) interval '250 milliseconds');
    v_warm := v_locked;
    -- Wait for the loop lock: the running loop (or a standby of ours) has
    -- it. Each step waits at most 100 ms in its own transaction (a fresh
    -- snapshot each step, so waiting never holds the xmin horizon back).
    WHILE NOT v_locked LOOP
        IF pgque.get_setting('ticker_loop_enabled') OPERATOR(pg_catalog.=) 'false' THEN
            RETURN;
        END IF;
        IF NOT v_warm AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_warm_at THEN
            -- Warm up while the running loop ticks: PL/pgSQL compiles a
            -- function, and plans each of its statements, on its first
            -- run in a backend (50-150 ms for the tick path on a loaded
            -- machine), which would otherwise stall the first round after
            -- the takeover. So run a real round - one queue forced due, so
            -- that every statement of the tick path runs (due_queues,
            -- tick_in_flight, tick_queue's snapshot and INSERT) - and undo
            -- it: the subtransaction is rolled back (its tick, the forced
            -- flag, its NOTIFY and its locks go with it; the tick id it
            -- drew stays used, a gap like any failed tick's). ticker()
            -- skips a queue whose tick another session holds, so the
            -- running loop and this never wait on each other; at worst one
            -- queue is ticked a round later.
            v_warm := true;
            BEGIN
                SELECT q.queue_name, q.queue_id INTO v_wq, v_wqid FROM pgque.queue q
                 WHERE NOT q.queue_external_ticker AND NOT q.queue_ticker_paused
                 ORDER BY q.queue_id LIMIT 1;
                IF v_wq IS NOT NULL THEN
                    PERFORM pgque.force_next_tick(v_wq);
                    -- A forced quiet queue's tick skips the pg_locks read
                    -- (due_queues' quiet): plan it here.
                    PERFORM FROM pgque.tick_in_flight(ARRAY[v_wqid]);
                END IF;
                v_plan := pgque.ticker_plan();
                INSERT INTO pgque.tick SELECT * FROM pg_catalog.unnest(v_plan);
                RAISE SQLSTATE 'PQWRM';
            EXCEPTION
                WHEN SQLSTATE 'PQWRM' THEN
                    NULL;
                WHEN OTHERS THEN
                    RAISE LOG 'pgque: ticker_loop warm-up: ticker() failed: % (%)', SQLERRM, SQLSTATE;
            END;
            COMMIT;
            BEGIN
                PERFORM pgque.rotate_metadata();
                PERFORM pgque.maint_rotate_tables_step2();
            EXCEPTION WHEN OTHERS THEN
                RAISE LOG 'pgque: ticker_loop warm-up: rotation failed: % (%)', SQLERRM, SQLSTATE;
            END;
            COMMIT;
        END IF;
        BEGIN
            PERFORM pg_catalog.set_config('lock_timeout', '100ms', true);
            PERFORM pg_catalog.pg_advisory_lock(c_class, c_key);
            v_locked := true;
        EXCEPTION WHEN lock_not_available THEN
            -- The holder may have let go just as the timeout fired (a
            -- waiter granted the lock but not scheduled before its timer
            -- went off): PostgreSQL then raises the timeout with the
            -- session-level lock granted, and the subtransaction's abort
            -- does not release it. Count it as taken - waiting again
            -- would take it a second time, and one unlock on the way out
            -- would leave it held until the backend exits.
            SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 INTO v_locked
              FROM pg_catalog.pg_locks l
             WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted
               AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
               AND l.classid OPERATOR(pg_catalog.=) c_class::pg_catalog.oid
               AND l.objid OPERATOR(pg_catalog.=) c_key::pg_catalog.oid
               AND l.objsubid OPERATOR(pg_catalog.=) 2
               AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d
                                                       WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database());
        END;
        COMMIT;
        IF NOT v_locked AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_give_up THEN
            RETURN;
        END IF;
    END LOOP;

    v_now := pg_catalog.clock_timestamp();
    v_deadline := pg_catalog.to_timestamp(
                      (pg_catalog.floor(EXTRACT(epoch FROM v_now) OPERATOR(pg_catalog./) v_slot)
                       OPERATOR(pg_catalog.+) 1) OPERATOR(pg_catalog.*) v_slot)
                  OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_overrun OPERATOR(pg_catalog./) 1000.0);
    -- Rotation and step 2 keep their cadence across a handover: not in
    -- the first round, which only ticks.
    v_next_cfg := v_now;
    v_next_meta := v_now OPERATOR(pg_catalog.+) interval '100 milliseconds';
    v_next_sw := v_now OPERATOR(pg_catalog.+) interval '1 second';
    v_next_mnt := v_now OPERATOR(pg_catalog.+) interval '5 seconds';
    v_planned := v_now;
    v_next_sum := v_now OPERATOR(pg_catalog.+) interval '10 seconds';
    LOOP
        v_t_round := pg_catalog.clock_timestamp();
        IF v_t_round OPERATOR(pg_catalog.>=) v_next_cfg THEN
            SELECT coalesce(pg_catalog.min(s.p), coalesce(pgque.get_setting('ticker_classic_loop_ms')::pg_catalog.int4, 1000))
              INTO v_period
              FROM (SELECT pgque.get_setting('tick_period_ms')::pg_catalog.int4 AS p
                    UNION ALL
                    SELECT q.queue_tick_period_ms FROM pgque.queue q
                     WHERE NOT q.queue_external_ticker AND NOT q.queue_ticker_paused) s;
            v_debug := coalesce(pgque.get_setting('ticker_debug_round_ms')::pg_catalog.int4, 0);
            -- ticker_plan() reads it from the session (no lookup a round).
            PERFORM pg_catalog.set_config('pgque.ticker_debug_round_ms', v_debug::pg_catalog.text, false);
            v_maint_ms := coalesce(pgque.get_setting('ticker_maint_ms')::pg_catalog.int4, 0);
            v_next_cfg := v_t_round OPERATOR(pg_catalog.+) interval '1 second';
        END IF;
        -- Idle (ticker_idle: nothing committed anywhere since a round that
        -- found nothing due, and nothing due by time yet): nothing to tick,
        -- no retry to move, and ticker_loop_enabled unchanged (pgque.stop()
        -- commits a write). The round costs that check.
        v_idle := pgque.ticker_idle();
        IF v_idle THEN
            -- ticker_idle's push state: no ticker_wake row either (no queue
            -- or setting change, no subscribe committed since the check).
            v_idle := NOT EXISTS (SELECT FROM pgque.ticker_wake);
        END IF;
        v_plan := NULL;
        IF NOT v_idle THEN
            -- Stopped (pgque.stop(), pgquectl tick --off): end now. (Read
            -- inline: get_setting would cost more than an idle round.)
            EXIT WHEN EXISTS (SELECT FROM pgque.settings s
                               WHERE s.name OPERATOR(pg_catalog.=) 'ticker_loop_enabled'
                                 AND s.value OPERATOR(pg_catalog.=) 'false');

            -- A failing round is logged and retried next round; the loop goes on.
            -- ticker() in two halves: the plan (every read, lock and check that
            -- can fail) in a block, the INSERT of its rows outside it - a write
            -- inside a block gives the subtransaction an xid that the round's
            -- commit record lists (~20 bytes a tick at 100 Hz). The INSERT does
            -- not wait: the plan holds its locks (tick_prepare).
            IF v_debug OPERATOR(pg_catalog.>) 0 THEN
                v_t_cfg := pg_catalog.clock_timestamp();
            END IF;
            -- ticker_plan's first step, here outside the block (a write):
            -- the ticker_wake rows this round's check accounts for.
            IF EXISTS (SELECT FROM pgque.ticker_wake) THEN
                DELETE FROM pgque.ticker_wake;
            END IF;
            BEGIN
                v_plan := pgque.ticker_plan();
            EXCEPTION WHEN OTHERS THEN
                RAISE WARNING 'pgque: ticker() failed this round: % (%)', SQLERRM, SQLSTATE;
            END;
            IF v_debug OPERATOR(pg_catalog.>) 0 THEN
                v_t_plan := pg_catalog.clock_timestamp();
            END IF;
            IF pg_catalog.cardinality(v_plan) OPERATOR(pg_catalog.>) 0 THEN
                INSERT INTO pgque.tick SELECT * FROM pg_catalog.unnest(v_plan);
            END IF;
            -- Retries whose time has come (ticker()'s second half); rare, so
            -- here a block's subtransaction xid costs nothing that matters.
            IF EXISTS (SELECT FROM pgque.retry_queue r
                        WHERE r.ev_retry_after OPERATOR(pg_catalog.<=) pg_catalog.now()) THEN
                BEGIN
                    PERFORM pg_catalog.set_config('lock_timeout',
                        coalesce(pgque.get_setting('ticker_lock_timeout_ms'), '20') OPERATOR(pg_catalog.||) 'ms', true);
                    PERFORM pgque.maint_retry_events();
                EXCEPTION WHEN OTHERS THEN
                    RAISE LOG 'pgque: ticker did not move retries this round: % (%)', SQLERRM, SQLSTATE;
                END;
                PERFORM pg_catalog.set_config('lock_timeout', v_timeout, true);
            END IF;
        ELSE
            v_plan := '{}';
            IF v_debug OPERATOR(pg_catalog.>) 0 THEN
                v_t_cfg := pg_catalog.clock_timestamp();
                v_t_plan := v_t_cfg;
            END IF;
        END IF;
        v_ticks := pg_catalog.cardinality(v_plan);
        IF v_debug OPERATOR(pg_catalog.>) 0 THEN
            v_t_ticker := pg_catalog.clock_timestamp();
        END IF;
        COMMIT;
        IF v_debug OPERATOR(pg_catalog.>) 0 THEN
            v_t_commit := pg_catalog.clock_timestamp();
            v_t_meta := v_t_commit;
            v_meta := NULL;
        END IF;

        IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_next_meta THEN
            BEGIN
                v_meta := pgque.rotate_metadata();
            EXCEPTION WHEN OTHERS THEN
                RAISE WARNING 'pgque: rotate_metadata() failed: % (%)', SQLERRM, SQLSTATE;
            END;
            COMMIT;
            v_next_meta := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) interval '100 milliseconds';
            IF v_debug OPERATOR(pg_catalog.>) 0 THEN
                v_t_meta := pg_catalog.clock_timestamp();
            END IF;
        END IF;
        IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_next_sw THEN
            BEGIN
                PERFORM pgque.maint_rotate_tables_step2();
            EXCEPTION WHEN OTHERS THEN
                RAISE WARNING 'pgque: maint_rotate_tables_step2() failed: % (%)', SQLERRM, SQLSTATE;
            END;
            COMMIT;
            v_next_sw := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) interval '1 second';
        END IF;
        -- pg_cron 1.4: the maintenance its per-minute jobs would do, here
        -- between rounds instead of in new backends at the minute boundary.
        IF v_maint_ms OPERATOR(pg_catalog.>) 0
           AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_next_mnt THEN
            BEGIN
                PERFORM pg_catalog.set_config('lock_timeout', '100ms', true);
                PERFORM pgque.maint();
            EXCEPTION WHEN OTHERS THEN
                RAISE WARNING 'pgque: maint() failed: % (%)', SQLERRM, SQLSTATE;
            END;
            COMMIT;
            v_next_mnt := pg_catalog.clock_timestamp()
                          OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_maint_ms OPERATOR(pg_catalog./) 1000.0);
        END IF;

        v_now := pg_catalog.clock_timestamp();
        IF v_debug OPERATOR(pg_catalog.>) 0
           AND v_now OPERATOR(pg_catalog.-) v_planned
               OPERATOR(pg_catalog.>) pg_catalog.make_interval(secs => v_debug OPERATOR(pg_catalog./) 1000.0) THEN
            RAISE LOG 'pgque: ticker_loop round took % ms (over ticker_debug_round_ms=%): sleep overshoot % ms, ticker() % ms (% ticks; settings % ms, ticker_plan() % ms, insert and retries % ms), commit % ms, rotate_metadata() % ms (%), step2 and maint() % ms',
                pg_catalog.round((EXTRACT(epoch FROM v_now OPERATOR(pg_catalog.-) v_planned) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1),
                v_debug,
                pg_catalog.round((EXTRACT(epoch FROM v_t_round OPERATOR(pg_catalog.-) v_planned) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1),
                pg_catalog.round((EXTRACT(epoch FROM v_t_ticker OPERATOR(pg_catalog.-) v_t_round) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1),
                coalesce(v_ticks::pg_catalog.text, 'failed'),
                pg_catalog.round((EXTRACT(epoch FROM v_t_cfg OPERATOR(pg_catalog.-) v_t_round) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1),
                pg_catalog.round((EXTRACT(epoch FROM v_t_plan OPERATOR(pg_catalog.-) v_t_cfg) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1),
                pg_catalog.round((EXTRACT(epoch FROM v_t_ticker OPERATOR(pg_catalog.-) v_t_plan) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1),
                pg_catalog.round((EXTRACT(epoch FROM v_t_commit OPERATOR(pg_catalog.-) v_t_ticker) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1),
                pg_catalog.round((EXTRACT(epoch FROM v_t_meta OPERATOR(pg_catalog.-) v_t_commit) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1),
                coalesce(v_meta::pg_catalog.text, 'not due'),
                pg_catalog.round((EXTRACT(epoch FROM v_now OPERATOR(pg_catalog.-) v_t_meta) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1);
        END IF;
        IF v_debug OPERATOR(pg_catalog.>) 0 THEN
            v_n_rounds := v_n_rounds OPERATOR(pg_catalog.+) 1;
            v_s_over := v_s_over OPERATOR(pg_catalog.+) EXTRACT(epoch FROM v_t_round OPERATOR(pg_catalog.-) v_planned)::pg_catalog.float8;
            v_s_tick := v_s_tick OPERATOR(pg_catalog.+) EXTRACT(epoch FROM v_t_ticker OPERATOR(pg_catalog.-) v_t_round)::pg_catalog.float8;
            v_s_commit := v_s_commit OPERATOR(pg_catalog.+) EXTRACT(epoch FROM v_t_commit OPERATOR(pg_catalog.-) v_t_ticker)::pg_catalog.float8;
            IF v_now OPERATOR(pg_catalog.>=) v_next_sum THEN
                RAISE LOG 'pgque: ticker_loop rounds: % in the last 10 s (period % ms): mean sleep overshoot % ms, ticker() % ms, commit % ms',
                    v_n_rounds, v_period,
                    pg_catalog.round((v_s_over OPERATOR(pg_catalog./) v_n_rounds OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 2),
                    pg_catalog.round((v_s_tick OPERATOR(pg_catalog./) v_n_rounds OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 2),
                    pg_catalog.round((v_s_commit OPERATOR(pg_catalog./) v_n_rounds OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 2);
                v_n_rounds := 0;
                v_s_over := 0;
                v_s_tick := 0;
                v_s_commit := 0;
                v_next_sum := v_now OPERATOR(pg_catalog.+) interval '10 seconds';
            END IF;
        END IF;
        v_ticks := NULL;

        EXIT WHEN v_now OPERATOR(pg_catalog.>=) v_deadline;
        v_next := pg_catalog.to_timestamp(
                      pg_catalog.ceil(EXTRACT(epoch FROM v_now) OPERATOR(pg_catalog.*) 1000 OPERATOR(pg_catalog./) v_period)
                      OPERATOR(pg_catalog.*) v_period OPERATOR(pg_catalog./) 1000.0);
        IF v_next OPERATOR(pg_catalog.<=) v_now THEN
            v_next := v_next OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_period OPERATOR(pg_catalog./) 1000.0);
        END IF;
        IF v_next OPERATOR(pg_catalog.>) v_deadline THEN
            v_next := v_deadline;
        END IF;
        v_planned := v_next;
        PERFORM pg_catalog.pg_sleep(EXTRACT(epoch FROM v_next OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()));
        -- End the sleep's transaction so the round's now() - tick_time and
        -- the period check - is taken after the sleep, not before it.
        COMMIT;
    END LOOP;
    -- Hand over at once: a run of the other job is waiting on the lock.
    -- Every hold of it (a session-level lock counts holds): a session that
    -- kept one would block every other run until its backend exits.
    LOOP
        EXIT WHEN NOT pg_catalog.pg_advisory_unlock(c_class, c_key);
        EXIT WHEN NOT EXISTS (
            SELECT FROM pg_catalog.pg_locks l
             WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted
               AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
               AND l.classid OPERATOR(pg_catalog.=) c_class::pg_catalog.oid
               AND l.objid OPERATOR(pg_catalog.=) c_key::pg_catalog.oid
               AND l.objsubid OPERATOR(pg_catalog.=) 2);
    END LOOP;
    COMMIT;
    -- Long slots (pg_cron >= 1.5): once a standby has taken over, linger
    -- 2 s before returning, so that the run pg_cron starts next for this
    -- job - a new backend, its start-up and its warm-up - does not compete
    -- with the new holder's first rounds. Holds nothing meanwhile (100 ms
    -- steps, each its own transaction). Not with short slots: the next run
    -- must be waiting before the next slot ends. Not when nobody took over
    -- (a lone run, a manual CALL): return at once.
    IF v_slot OPERATOR(pg_catalog.>=) 10 THEN
        -- A run waiting on the lock has it by now (the lock manager grants
        -- it on the unlock); one look, so that a run nobody took over from
        -- returns at once.
        SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 INTO v_handed
          FROM pg_catalog.pg_locks l
         WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted
           AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
           AND l.classid OPERATOR(pg_catalog.=) c_class::pg_catalog.oid
           AND l.objid OPERATOR(pg_catalog.=) c_key::pg_catalog.oid
           AND l.objsubid OPERATOR(pg_catalog.=) 2
           AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d
                                                   WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database());
        COMMIT;
        IF v_handed THEN
            FOR i IN 1..20 LOOP
                EXIT WHEN pgque.get_setting('ticker_loop_enabled') OPERATOR(pg_catalog.=) 'false';
                PERFORM pg_catalog.pg_sleep(0.1);
                COMMIT;
            END LOOP;
        END IF;
    END IF;
END;
$$;
