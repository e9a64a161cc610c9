-- pgque.delivery_state(i_sub_id): the subscription's open receive()
-- delivery as its sequences hold it (see delivery_seqs): batch_id (NULL:
-- none out), leased_at (when receive() returned it), end_tick (the batch's
-- end tick), sent (the last event id returned; NULL: the rest of the
-- batch). Locks: none; reads sequences (no write). Called by: receive,
-- delivery_sub, lock_batch, register_consumer_at, get_consumer_info.
--
-- pgque.delivery_state(i_sub_id, i_batch_id, i_leased_at, i_end_tick,
-- i_sent): record a delivery (i_batch_id NULL: none is out; the other
-- fields are then left as they are). No WAL on PostgreSQL 15+ (unlogged
-- sequences), not transactional: the caller holds the subscription's batch
-- lock. Returns: nothing. Writes: the sequences. Called by: receive, ack.
CREATE OR REPLACE FUNCTION pgque.delivery_state(i_sub_id int, OUT batch_id bigint, OUT leased_at timestamptz,
                                                OUT end_tick bigint, OUT sent bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_p text := 'pgque.delivery_' || i_sub_id || '_';
BEGIN
    batch_id := nullif(coalesce(pg_sequence_last_value((v_p || 'batch')::regclass), 0), 0);
    IF batch_id IS NULL THEN
        RETURN;
    END IF;
    leased_at := to_timestamp(coalesce(pg_sequence_last_value((v_p || 'at')::regclass), 0) / 1000000.0);
    end_tick := pg_sequence_last_value((v_p || 'end')::regclass);
    sent := nullif(coalesce(pg_sequence_last_value((v_p || 'sent')::regclass), 0), 0);
END;
$$;

CREATE OR REPLACE FUNCTION pgque.delivery_state(i_sub_id int, i_batch_id bigint, i_leased_at timestamptz,
                                                i_end_tick bigint, i_sent bigint)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_p text := 'pgque.delivery_' || i_sub_id || '_';
BEGIN
    IF i_batch_id IS NOT NULL THEN
        PERFORM setval((v_p || 'at')::regclass, (extract(epoch FROM i_leased_at) * 1000000)::bigint);
        PERFORM setval((v_p || 'end')::regclass, i_end_tick);
        PERFORM setval((v_p || 'sent')::regclass, coalesce(i_sent, 0));
    END IF;
    -- The batch id last (readers that decide take the batch lock).
    PERFORM setval((v_p || 'batch')::regclass, coalesce(i_batch_id, 0));
END;
$$;
