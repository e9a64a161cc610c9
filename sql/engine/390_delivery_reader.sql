-- Who holds a subscription's open receive() delivery, and is that session
-- still there. The reader is recorded twice: its backend pid in the
-- delivery_<sub_id>_reader sequence (see delivery_seqs), and a session-level
-- advisory lock (pgque.lock_id_subscription_reader_class(), sub_id), taken SHARED by the receiving session.
-- PostgreSQL releases a session's locks when its backend exits, however it
-- ends (disconnect, crash of the client, pg_terminate_backend), so "the
-- recorded pid holds that lock" means "the session that received the
-- delivery is alive", and a pid reused by a new backend never holds it: a
-- session takes the lock only in the receive() that records it as reader.
-- The lock is shared so that sessions that read this consumer earlier and
-- still hold it (an ack from another session cannot release it) never
-- block the next reader; a stale holder whose pid is not the recorded one
-- is ignored. pg_locks is readable by every role, so the check works for
-- pgque_reader logins whatever the installer's privileges
-- (pg_stat_activity hides other users' backend_start).
-- Poolers: DISCARD ALL (pgbouncer's session-mode reset) releases the lock,
-- which is right (the client is gone). In transaction mode one server
-- session serves many clients: see docs/design/engine.md, "Batches".
--
-- pgque.delivery_reader(i_sub_id): the recorded reader of the
-- subscription's delivery: pid (NULL: none recorded, e.g. by an earlier
-- install) and live (that backend still holds the reader lock).
-- Reads pg_locks (the whole lock table): called only while a delivery is
-- out. Locks: none. Called by: receive.
--
-- pgque.delivery_claim(i_sub_id): record the calling session as the
-- reader of the delivery receive() is about to return, and take one hold
-- of the reader lock. Session-level on purpose: it outlives the
-- transaction (a delivery is not transactional either) and ends with the
-- session. A session that already holds it (an earlier delivery acked by
-- another session) adds a hold; ack in this session gives one back.
-- Writes: the _reader sequence, only when the pid changes (a reader that
-- receives and acks in a loop writes nothing). Locks: the reader lock
-- (session, shared: it never waits, nobody takes it exclusively).
-- Called by: receive (holding the batch lock).
--
-- pgque.delivery_release(i_sub_id): the delivery was acknowledged (or
-- finished): when the calling session is its recorded reader, give back
-- one hold of the reader lock. An ack from another session leaves the
-- reader's hold in place (only its owner can release it): harmless, the
-- pid no longer names the next delivery's reader; it ends with the
-- session. A session that released its advisory locks itself
-- (pg_advisory_unlock_all, DISCARD ALL) before acking gets PostgreSQL's
-- warning "you don't own a lock of type ShareLock" here, as does the rare
-- new backend that reuses a dead reader's pid and acks its delivery.
-- Locks: releases the reader lock. Writes: nothing.
-- Called by: ack, finish_batch (holding the batch lock).
CREATE OR REPLACE FUNCTION pgque.delivery_reader(i_sub_id int, OUT pid int, OUT live boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    pid := nullif(pg_sequence_last_value(('pgque.delivery_' || i_sub_id || '_reader')::regclass), 0)::int;
    live := pid IS NOT NULL AND EXISTS (
        SELECT 1 FROM pg_lock_status() l
         WHERE l.locktype = 'advisory' AND l.classid = pgque.lock_id_subscription_reader_class()::oid AND l.objid = i_sub_id::oid
           AND l.objsubid = 2 AND l.pid = delivery_reader.pid AND l.granted
           AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()));
END;
$$;

CREATE OR REPLACE FUNCTION pgque.delivery_claim(i_sub_id int)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_seq regclass := ('pgque.delivery_' || i_sub_id || '_reader')::regclass;
BEGIN
    IF pg_sequence_last_value(v_seq) IS DISTINCT FROM pg_backend_pid() THEN
        PERFORM setval(v_seq, pg_backend_pid());
    END IF;
    PERFORM pg_advisory_lock_shared(pgque.lock_id_subscription_reader_class(), i_sub_id);
END;
$$;

CREATE OR REPLACE FUNCTION pgque.delivery_release(i_sub_id int)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
BEGIN
    IF pg_sequence_last_value(('pgque.delivery_' || i_sub_id || '_reader')::regclass) = pg_backend_pid() THEN
        PERFORM pg_advisory_unlock_shared(pgque.lock_id_subscription_reader_class(), i_sub_id);
    END IF;
END;
$$;
