-- pgque.delivery_seqs(i_sub_id, i_create): create (i_create) or drop the
-- five sequences that hold a subscription's open receive() delivery:
-- pgque.delivery_<sub_id>_batch (its batch id, 0: none), _at (lease start,
-- microseconds since the epoch), _end (the batch's end tick), _sent (the
-- last event id it returned, 0: the rest of the batch) and _reader (the
-- backend pid of the session that received it, 0: unknown; see
-- delivery_reader).
-- Why sequences: receive() must record that a delivery is out (one reader
-- per consumer) without writing WAL. A sequence is updated in place (no
-- dead tuples, whatever xmin is held), and an UNLOGGED one (PostgreSQL 15+)
-- writes no WAL and needs no transaction id. It is not transactional and is
-- reset to 0 by crash recovery: a delivery then counts as not out and is
-- delivered again (at-least-once); the durable cursor is the subscription
-- row, which only ack() and finish paths write. On PostgreSQL 14 the
-- sequences are logged (correct, but each delivery then writes WAL).
-- Idempotent. Locks: creates/drops the sequences.
-- Called by: register_consumer_at, unregister_consumer, drop_queue, install
-- (existing subscriptions).
CREATE OR REPLACE FUNCTION pgque.delivery_seqs(i_sub_id int, i_create boolean)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_f text;
BEGIN
    FOREACH v_f IN ARRAY ARRAY['batch', 'at', 'end', 'sent', 'reader'] LOOP
        IF i_create THEN
            EXECUTE format('CREATE %s SEQUENCE IF NOT EXISTS pgque.%I AS bigint MINVALUE 0 START 0 NO CYCLE',
                           CASE WHEN current_setting('server_version_num')::int >= 150000 THEN 'UNLOGGED' ELSE '' END,
                           'delivery_' || i_sub_id || '_' || v_f);
        ELSE
            EXECUTE format('DROP SEQUENCE IF EXISTS pgque.%I', 'delivery_' || i_sub_id || '_' || v_f);
        END IF;
    END LOOP;
END;
$$;

-- Upgrade: existing subscriptions get their sequences (and _reader, new in
-- this version).
DO $upgrade$
DECLARE
    v_id int;
BEGIN
    FOR v_id IN SELECT s.sub_id FROM pgque.subscription s LOOP
        PERFORM pgque.delivery_seqs(v_id, true);
    END LOOP;
END $upgrade$;
