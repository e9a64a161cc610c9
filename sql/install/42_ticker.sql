-- pgque.ticker(): tick every queue that is due (see due_queues). A queue
-- whose tick would wait on a lock longer than ticker_lock_timeout_ms, or
-- whose tick lock another session holds, is skipped until the next call, so
-- one stuck queue never stalls the others.
-- Returns: how many queues were ticked. Locks: per queue, as tick_queue.
-- Writes: tick. Called by: ticker_loop(), the ticker daemon, cron, users.
--
-- pgque.ticker(i_queue_name): tick one queue if due. Returns: the new tick
-- id, or NULL when none was due (or another session is ticking it).
CREATE OR REPLACE FUNCTION pgque.ticker()
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_due     record;
    v_qid     int;
    v_last    bigint;
    v_n       bigint := 0;
    v_timeout text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', coalesce(pgque.get_setting('ticker_lock_timeout_ms'), '20') || 'ms', true);
    BEGIN
        FOR v_due IN SELECT * FROM pgque.due_queues(NULL) LOOP
            BEGIN
                IF pgque.tick_queue(v_due.queue_id, v_due.last_tick_id) IS NOT NULL THEN
                    v_n := v_n + 1;
                END IF;
            EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                RAISE LOG 'pgque: ticker skipped queue % this round: %', v_due.queue_name, SQLERRM;
            END;
        END LOOP;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        -- Some queue's objects are locked (being dropped or altered) and the
        -- set-based check could not read them: check queue by queue instead.
        v_n := 0;
        FOR v_qid IN SELECT q.queue_id FROM pgque.queue q ORDER BY q.queue_id LOOP
            BEGIN
                SELECT d.last_tick_id INTO v_last FROM pgque.due_queues(v_qid) d;
                IF FOUND AND pgque.tick_queue(v_qid, v_last) IS NOT NULL THEN
                    v_n := v_n + 1;
                END IF;
            EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                RAISE LOG 'pgque: ticker skipped queue id % this round: %', v_qid, SQLERRM;
            END;
        END LOOP;
    END;
    PERFORM set_config('lock_timeout', v_timeout, true);
    RETURN v_n;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.ticker(i_queue_name text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue := pgque.find_queue(i_queue_name);
    v_last  bigint;
BEGIN
    SELECT d.last_tick_id INTO v_last FROM pgque.due_queues(v_queue.queue_id) d;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN pgque.tick_queue(v_queue.queue_id, v_last);
END;
$$;
