-- pgque.tick_in_flight(i_queue_ids): for each of these queues, who may
-- have allocated event ids or inserted events and not finished yet - read
-- from pg_locks once for all of them (docs/design/engine.md, "Visibility and
-- re-ticks"). Every transaction that allocated an id of a queue holds
-- RowExclusiveLock on the queue's event sequence from before the allocation
-- until it ends (nextval takes it; so does pg_sequence_last_value, which is
-- how tickers and monitors read it), and one that inserted events holds
-- RowExclusiveLock on an event table. Per queue it returns:
--   xids: the transaction ids (32-bit, as pg_locks has them) of holders
--         other than the caller's own transaction and other than tickers
--         that inserted nothing (they hold the shared advisory lock
--         (pgque.lock_id_class(), pgque.lock_id_ticking()) that ticker() takes, and only read the sequence);
--   probe: some other holder had no xid yet (between nextval and its
--         INSERT), or is such a ticker: it cannot be named by xid;
--   own_inserted: the caller's own transaction inserted events of the queue.
-- Must be called after the queues' sequences were read and before the
-- tick's snapshot is taken (tick_queue). An empty array reads nothing.
-- Its statement is planned once per session: its parameters are read
-- through scalar subqueries ((SELECT i_queue_ids)), so a custom plan would
-- cost the same as the generic one and PL/pgSQL keeps the generic plan
-- (with the parameters' values visible the planner priced custom plans
-- lower and re-planned the statement on every call). It spells the event
-- table names out instead of calling pgque.event_table (an SQL function
-- with SET: run through the executor, planned, on every call).
-- Returns: one row per existing queue. Locks: none (reads pg_locks).
-- Called by: ticker(), ticker(queue).
CREATE OR REPLACE FUNCTION pgque.tick_in_flight(i_queue_ids int[])
RETURNS TABLE (queue_id int, probe boolean, own_inserted boolean, xids bigint[])
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_db oid;
BEGIN
    IF coalesce(cardinality(i_queue_ids), 0) = 0 THEN
        RETURN;
    END IF;
    SELECT d.oid INTO v_db FROM pg_database d WHERE d.datname = current_database();
    RETURN QUERY
    WITH qs AS (
        SELECT q.queue_id, q.queue_event_seq::oid AS seq,
               ARRAY(SELECT pg_catalog.to_regclass('pgque.event_' || q.queue_id || '_' || n)::oid
                       FROM generate_series(0, q.queue_ntables - 1) n) AS tbls
          FROM pgque.queue q
         WHERE q.queue_id = ANY ((SELECT i_queue_ids)::int[])
    ), v AS (
        SELECT l.virtualtransaction,
               coalesce(bool_or(l.pid = pg_backend_pid()), false) AS own,
               coalesce(bool_or(l.locktype = 'advisory' AND l.classid = pgque.lock_id_class()::oid
                                AND l.objid = pgque.lock_id_ticking()::oid AND l.objsubid = 2), false) AS ticker,
               array_agg(l.transactionid::text::bigint)
                   FILTER (WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock') AS xids,
               array_agg(l.relation)
                   FILTER (WHERE l.locktype = 'relation' AND l.mode = 'RowExclusiveLock') AS rels
          FROM pg_lock_status() l
         WHERE l.granted
           -- only the kinds of lock used below: the rest (every reader's
           -- AccessShareLock, virtualxids, ...) is most of a busy lock table
           AND (l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock'
                OR l.database = (SELECT v_db)
                   AND (l.locktype = 'relation' AND l.mode = 'RowExclusiveLock'
                        OR l.locktype = 'advisory' AND l.classid = pgque.lock_id_class()::oid
                           AND l.objid = pgque.lock_id_ticking()::oid AND l.objsubid = 2))
         GROUP BY l.virtualtransaction
    ), h AS (
        -- The caller's own transaction reads every sequence (due_queues):
        -- only its event-table locks matter.
        SELECT qs.queue_id, v.own, v.ticker, v.xids, v.rels && qs.tbls AS inserted
          FROM qs JOIN v ON CASE WHEN v.own THEN v.rels && qs.tbls ELSE v.rels && (qs.tbls || qs.seq) END
    )
    SELECT qs.queue_id,
           coalesce(bool_or(NOT h.own AND (h.xids IS NULL OR (h.ticker AND NOT h.inserted))), false),
           coalesce(bool_or(h.own AND h.inserted), false),
           array_agg(x) FILTER (WHERE x IS NOT NULL)
      FROM qs
      LEFT JOIN h ON h.queue_id = qs.queue_id
      LEFT JOIN LATERAL unnest(CASE WHEN NOT h.own AND (h.inserted OR NOT h.ticker) THEN h.xids END) x ON true
     GROUP BY qs.queue_id;
END;
$$;
