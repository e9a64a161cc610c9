-- pgque.tick_queue(i_queue_id, i_last_tick_id): make one tick for a queue,
-- unless another session holds the queue's tick lock (then skip: NULL) or a
-- tick newer than i_last_tick_id appeared meanwhile (another ticker won).
-- Records the event sequence's position (tick_event_seq), the snapshot
-- (tick_snapshot) and the producers still in flight (tick_wait,
-- tick_wait_probe), clears a forced tick, and NOTIFYs pgque_<queue> when the
-- tick carries new event ids and the notify queue is not backed up (a
-- stalled listener must not fill it).
--
-- Visibility (docs/engine.md, "Visibility and re-ticks"): an event id can be
-- counted by a tick (ev_id <= tick_event_seq) while its transaction is not
-- visible in the tick's snapshot (its xid is in xip, or >= xmax - it got its
-- xid after the snapshot, or after the ticker's own xid). Such an event is
-- in the first later batch whose end tick sees it; due_queues must make that
-- tick happen within one period of the producer's commit. So a tick records
-- who may have left events behind, in this order:
--   1. read the sequence (r);
--   2. read pg_locks (p): every transaction that allocated an event id of
--      this queue holds RowExclusiveLock on the queue's event sequence from
--      before the allocation until it ends (nextval takes it), and one that
--      inserted holds RowExclusiveLock on an event table; so a producer
--      whose id was counted at r and which is not visible at 3 still holds
--      one of them at p;
--   3. take the snapshot (s);
--   then tick_wait = the xids those holders had at p that are not visible in
--   the snapshot (a holder that ended before s is visible, or aborted);
--   tick_wait_probe = some holder had no xid yet at p (it gets one later,
--   >= xmax or in xip): due_queues re-checks such a tick with an index probe.
-- The ticking transaction itself is skipped unless it inserted events of
-- this queue (send and ticker() in one transaction). Another ticker (it
-- holds the shared advisory lock (1885827445, 6) that ticker() takes) that
-- inserted nothing only read the sequence - unless it is between nextval
-- and INSERT of a send_batch in its own transaction - so it sets
-- tick_wait_probe rather than entering tick_wait: two tickers running at
-- once then cost index probes, never extra ticks.
-- Reading pg_locks costs a few microseconds per tick; idle checks never do.
-- Refuses to run outside READ COMMITTED: a REPEATABLE READ ticker would
-- record a snapshot older than the previous tick's (ticks only move forward).
-- Returns: the new tick id or NULL. Locks: advisory (1885827446, queue_id),
-- non-blocking; reads pg_locks. Writes: tick (insert), queue (only to clear
-- a forced tick). Called by: ticker(), ticker(queue).
CREATE OR REPLACE FUNCTION pgque.tick_queue(i_queue_id int, i_last_tick_id bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pgque, pg_catalog
AS $$
DECLARE
    v_queue   pgque.queue;
    v_last    record;
    v_seq     bigint;
    v_tables  oid[];
    v_db      oid;
    v_probe   boolean;
    v_ownprod boolean;
    v_xids    bigint[];
    v_snap    pg_snapshot;
    v_xmax    bigint;
    v_wait    xid8[];
    v_tick_id bigint;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgque: ticker() must run in READ COMMITTED, not %', upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'A tick records the current snapshot; in REPEATABLE READ or SERIALIZABLE it could be older than the previous tick. Call the ticker in its own READ COMMITTED transaction.';
    END IF;
    IF NOT pg_try_advisory_xact_lock(1885827446, i_queue_id) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = i_queue_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT t.tick_id, t.tick_event_seq INTO v_last
      FROM pgque.tick t WHERE t.tick_queue = i_queue_id
     ORDER BY t.tick_id DESC LIMIT 1;
    IF v_last.tick_id IS DISTINCT FROM i_last_tick_id THEN
        RETURN NULL;
    END IF;

    -- 1. The sequence.
    v_seq := coalesce(pg_sequence_last_value(v_queue.queue_event_seq), 0);

    -- 2. Who may have allocated ids or inserted events and not finished.
    v_tables := ARRAY(SELECT to_regclass(pgque.event_table(i_queue_id, n))::oid
                        FROM generate_series(0, v_queue.queue_ntables - 1) n);
    SELECT d.oid INTO v_db FROM pg_database d WHERE d.datname = current_database();
    WITH l AS (
        SELECT * FROM pg_locks l
         WHERE l.granted AND (l.locktype = 'transactionid' OR l.database = v_db)
    ), h AS (
        SELECT coalesce(bool_or(l.pid = pg_backend_pid()), false) AS own,
               bool_or(l.locktype = 'relation' AND l.mode = 'RowExclusiveLock'
                       AND (l.relation = v_queue.queue_event_seq::oid OR l.relation = ANY (v_tables))) AS holds,
               bool_or(l.locktype = 'relation' AND l.mode = 'RowExclusiveLock' AND l.relation = ANY (v_tables)) AS inserted,
               bool_or(l.locktype = 'advisory' AND l.classid = 1885827445::oid AND l.objid = 6::oid
                       AND l.objsubid = 2) AS ticker,
               array_agg(l.transactionid::text::bigint)
                   FILTER (WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock') AS xids
          FROM l
         GROUP BY l.virtualtransaction
    )
    SELECT coalesce((SELECT bool_or(h.xids IS NULL OR (h.ticker AND NOT h.inserted)) FROM h
                      WHERE h.holds AND NOT h.own), false),
           coalesce((SELECT bool_or(h.inserted) FROM h WHERE h.holds AND h.own), false),
           (SELECT array_agg(x) FROM h, unnest(h.xids) x
             WHERE h.holds AND NOT h.own AND (h.inserted OR NOT h.ticker))
      INTO v_probe, v_ownprod, v_xids;

    -- 3. The snapshot; tick_wait = the holders' xids it does not see.
    v_snap := pgque.tick_snapshot();
    v_xmax := pg_snapshot_xmax(v_snap)::text::bigint;
    SELECT array_agg(DISTINCT f ORDER BY f) INTO v_wait
      FROM (SELECT (v_xmax + CASE WHEN d >= 2147483648 THEN d - 4294967296 ELSE d END)::text::xid8 AS f
              FROM (SELECT ((x - v_xmax % 4294967296) % 4294967296 + 4294967296) % 4294967296 AS d
                      FROM unnest(v_xids) x) a
            UNION ALL
            SELECT pg_current_xact_id() WHERE v_ownprod) b
     WHERE NOT pg_visible_in_snapshot(f, v_snap);

    INSERT INTO pgque.tick (tick_gen, tick_queue, tick_id, tick_snapshot, tick_event_seq, tick_new_ids,
                            tick_wait, tick_wait_probe)
    VALUES (pgque.tick_gen(now()), i_queue_id, nextval(v_queue.queue_tick_seq), v_snap, v_seq,
            greatest(v_seq - coalesce(v_last.tick_event_seq, 0), 0), v_wait, v_probe)
    RETURNING tick_id INTO v_tick_id;
    IF v_queue.queue_force_tick THEN
        UPDATE pgque.queue SET queue_force_tick = false WHERE queue_id = i_queue_id;
    END IF;
    IF v_seq > coalesce(v_last.tick_event_seq, 0)
       AND pg_notification_queue_usage() <= coalesce(pgque.get_setting('notify_max_queue_usage')::float8, 0.001)
    THEN
        PERFORM pg_notify('pgque_' || v_queue.queue_name, v_tick_id::text);
    END IF;
    RETURN v_tick_id;
END;
$$;
