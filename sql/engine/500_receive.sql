-- pgque.receive(i_queue, i_consumer, i_max_return): open (or re-open) the
-- consumer's batch and return up to i_max_return of its events that are not
-- yet acknowledged, as pgque.message rows. A new batch spans as many ticks as
-- fit i_max_return; a batch with nothing for this consumer is finished at
-- once (never stored) and the next one tried. When more events remain than
-- were returned, ack() keeps the batch open with a position inside it, and
-- the next receive() returns the rest (no silent skip).
-- Every receive that returns events is one delivery with its own batch id
-- (2^62 + sub_id * 2^31 + a batch_id_seq value mod 2^31, see delivery_sub):
-- ack/nack of an older id of the same consumer return 0 / raise "batch not
-- found", so a retried or late ack can never acknowledge someone else's
-- events.
-- One reader per consumer: while a delivery is not acknowledged,
--  * a receive() from the session that received it returns it again: the
--    same batch id and events (receive_again), as PgQue does;
--  * when that session has ended (its backend exited: crash,
--    disconnect, pg_terminate_backend), the next receive() delivers the
--    unacknowledged events again at once, under a new id;
--  * a receive() from another live session is refused with SQLSTATE 55P03
--    (lock_not_available) until the delivery's lease ends (the queue's
--    lease_time option in seconds, default 60); after that the reader is
--    presumed stuck and the events are delivered again under a new id.
-- The reader is the backend pid plus a session-level advisory lock
-- (delivery_reader), checked only while a delivery is out.
-- WAL: a delivery is recorded in the subscription's unlogged sequences
-- (delivery_state), not in its row, so a receive that returns events
-- writes no WAL and takes no transaction id on PostgreSQL 15+ (the batch
-- id sequence logs once per 32 ids); ack() makes the one durable write.
-- Not transactional: a receive whose transaction rolls back still holds
-- the lease (its rows were returned) until it is acked or the lease ends.
-- In REPEATABLE READ / SERIALIZABLE the row is locked FOR SHARE (a row an
-- ack changed after the snapshot raises 40001 instead of being re-read
-- stale); that lock writes WAL, READ COMMITTED callers never take it.
-- Returns: setof pgque.message. Locks: the subscription's batch lock; the
-- reader lock (session-level, shared) for the delivery it returns.
-- Writes: the delivery sequences; the subscription row only to finish a
-- batch with nothing for this consumer. Called by: consumers (pgque_reader).
CREATE OR REPLACE FUNCTION pgque.receive(i_queue text, i_consumer text, i_max_return int DEFAULT 100)
RETURNS SETOF pgque.message
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub   pgque.subscription;
    v_next  bigint;
    v_rows  pgque.message[];
    v_last  bigint;
    v_try   int := 0;
    v_lease int;
    v_batch bigint;
    v_del   record;
    v_out   bigint;
    v_at    timestamptz;
    v_pid   int;
    v_live  boolean;
    v_limit int := CASE WHEN i_max_return < 2147483647 THEN i_max_return + 1 END;
BEGIN
    IF i_max_return IS NULL OR i_max_return < 1 THEN
        RAISE EXCEPTION 'pgque: i_max_return must be at least 1 (got %)', coalesce(i_max_return::text, 'NULL')
            USING ERRCODE = 'raise_exception';
    END IF;
    v_sub := pgque.find_subscription(i_queue, i_consumer);
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM 1 FROM pgque.subscription s WHERE s.sub_id = v_sub.sub_id FOR SHARE;
    END IF;
    SELECT * INTO v_del FROM pgque.delivery_state(v_sub.sub_id);
    IF v_del.batch_id IS NOT NULL THEN
        SELECT r.pid, r.live INTO v_pid, v_live FROM pgque.delivery_reader(v_sub.sub_id) r;
        IF v_live AND v_pid = pg_backend_pid() THEN
            -- The session that received it asks again: the same delivery.
            RETURN QUERY SELECT * FROM pgque.receive_again(v_sub, v_del.batch_id, v_del.end_tick, v_del.sent, i_max_return);
            RETURN;
        END IF;
    END IF;
    IF v_del.batch_id IS NOT NULL AND (v_live OR v_pid IS NULL) OR v_sub.sub_batch_recv THEN
        -- A delivery is out and not acknowledged, and its reader's session
        -- is alive (or unknown: sub_batch_recv is one an earlier install
        -- recorded in the row): refuse a second reader until its lease ends.
        v_out := coalesce(v_del.batch_id, v_sub.sub_batch);
        v_at := CASE WHEN v_del.batch_id IS NOT NULL THEN v_del.leased_at ELSE v_sub.sub_active END;
        SELECT coalesce((q.queue_options ->> 'lease_time')::int, 60) INTO v_lease
          FROM pgque.queue q WHERE q.queue_id = v_sub.sub_queue;
        IF clock_timestamp() < v_at + v_lease * interval '1 second' THEN
            RAISE EXCEPTION 'pgque: consumer "%" of queue "%" has an unacknowledged delivery (batch %, received % ago)',
                    i_consumer, i_queue, v_out, date_trunc('millisecond', clock_timestamp() - v_at)
                USING ERRCODE = 'lock_not_available',
                      DETAIL = CASE WHEN v_pid IS NOT NULL
                                    THEN format('A consumer has one reader at a time: the session with backend pid %s received events that it has neither acked nor given up.', v_pid)
                                    ELSE 'A consumer has one reader at a time: another receive() returned events that were neither acked nor given up.' END,
                      HINT = format('Ack (or nack, then ack) batch %s from the reader that received it; once that session ends, the next receive() returns its events at once, else when the lease (%s s, queue option lease_time) has ended. Parallel readers need distinct consumer names.',
                                    v_out, v_lease);
        END IF;
        -- The lease ended: redeliver from the acknowledged position under a
        -- new id (the row's open batch, or a new one from its cursor).
    END IF;
    -- No delivery is out, its reader's session has ended, or its lease
    -- ended: a new delivery (the old id's ack returns 0).
    LOOP
        v_try := v_try + 1;
        IF v_sub.sub_batch IS NULL THEN
            v_next := pgque.batch_end_tick(v_sub, i_max_return);
            IF v_next IS NULL THEN
                RETURN;
            END IF;
            v_sub.sub_batch := 0;  -- open (the id is drawn once there are events)
            v_sub.sub_next_tick := v_next;
            v_sub.sub_batch_pos := NULL;
        END IF;
        SELECT array_agg(ROW(e.ev_id, NULL, e.ev_type, e.ev_data, coalesce(e.ev_retry, 0), e.ev_time,
                             e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4)::pgque.message ORDER BY e.ev_id)
          INTO v_rows
          FROM pgque.batch_event_rows(v_sub, v_sub.sub_batch_pos, v_limit) e;
        EXIT WHEN v_rows IS NOT NULL;
        -- Nothing (left) for this consumer in the batch: finish it, try the next.
        UPDATE pgque.subscription
           SET sub_last_tick = v_sub.sub_next_tick, sub_batch = NULL, sub_next_tick = NULL,
               sub_batch_pos = NULL, sub_batch_sent = NULL, sub_batch_recv = false, sub_active = now()
         WHERE sub_id = v_sub.sub_id;
        IF v_try >= 10 THEN
            RETURN;
        END IF;
        v_sub.sub_last_tick := v_sub.sub_next_tick;
        v_sub.sub_batch := NULL;
        v_sub.sub_next_tick := NULL;
    END LOOP;
    IF cardinality(v_rows) > i_max_return THEN
        v_rows := v_rows[1:i_max_return];
        v_last := v_rows[i_max_return].msg_id;
    END IF;
    v_batch := 4611686018427387904 + (v_sub.sub_id::bigint << 31) + (nextval('pgque.batch_id_seq') & 2147483647);
    IF v_sub.sub_batch_recv THEN
        -- Retire a delivery an earlier install recorded in the row (its
        -- lease ended): its late ack finds no batch.
        UPDATE pgque.subscription
           SET sub_batch = CASE WHEN sub_batch_pos IS NULL THEN NULL ELSE sub_batch END,
               sub_next_tick = CASE WHEN sub_batch_pos IS NULL THEN NULL ELSE sub_next_tick END,
               sub_batch_sent = NULL, sub_batch_recv = false
         WHERE sub_id = v_sub.sub_id;
    END IF;
    PERFORM pgque.delivery_state(v_sub.sub_id, v_batch, clock_timestamp(), v_sub.sub_next_tick, v_last);
    PERFORM pgque.delivery_claim(v_sub.sub_id);
    RETURN QUERY
        SELECT m.msg_id, v_batch, m.type, m.payload, m.retry_count, m.created_at,
               m.extra1, m.extra2, m.extra3, m.extra4
          FROM unnest(v_rows) m;
END;
$$;
