-- pgque.get_batch_events(x_batch_id): all events of an open batch (PgQ
-- primitive; ignores receive()'s position). Unknown or finished batch: no
-- rows. A receive() delivery id: the delivery's batch (delivery_sub).
-- VOLATILE: the subscription read takes its snapshot after locking the
-- subscription children, so a rotation it waited behind committed before
-- it (STABLE, it read with the caller's older snapshot: an open batch
-- whose row the rotation moved gave no rows; docs/design/engine.md "Metadata
-- rotation"). Locks: ACCESS SHARE on the subscription and tick children.
-- Called by: PgQ-style consumers.
CREATE OR REPLACE FUNCTION pgque.get_batch_events(x_batch_id bigint)
RETURNS TABLE (ev_id bigint, ev_time timestamptz, ev_txid bigint, ev_retry int4, ev_type text,
               ev_data text, ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub pgque.subscription;
BEGIN
    IF x_batch_id >= 4611686018427387904 THEN
        v_sub := pgque.delivery_sub(x_batch_id);  -- a receive() delivery
    ELSE
        SELECT s.* INTO v_sub FROM pgque.subscription s WHERE s.sub_batch = x_batch_id;
    END IF;
    IF v_sub.sub_id IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT e.ev_id, e.ev_time, e.ev_txid::text::bigint, e.ev_retry, e.ev_type, e.ev_data,
               e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4
          FROM pgque.batch_event_rows(v_sub, NULL, NULL) e;
END;
$$;
