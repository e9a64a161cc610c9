-- pgque.nack(i_batch_id, i_msg, i_retry_after, i_reason): the consumer
-- failed one message. Only i_msg.msg_id is trusted: the event is re-read from
-- the open batch. Below max_retries (queue setting, NULL = 5) it is retried
-- for this consumer after i_retry_after; once its retries are spent it goes
-- to the dead-letter table, once per (queue, consumer, event).
-- An unknown or finished batch raises 'batch not found: <id>' (PgQue 0.2's
-- message, which clients match on).
-- Returns: 1 done, 0 the event is not in the batch (or already scheduled).
-- Locks: the subscription's batch lock. Writes: retry_queue or dead_letter.
-- Called by: consumers (pgque_reader).
CREATE OR REPLACE FUNCTION pgque.nack(i_batch_id bigint, i_msg pgque.message,
                                      i_retry_after interval DEFAULT '60 seconds', i_reason text DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_sub   pgque.subscription;
    v_max   int;
    v_ev    record;
BEGIN
    IF i_msg IS NULL OR i_msg.msg_id IS NULL THEN
        RAISE EXCEPTION 'pgque: nack needs the message (its msg_id)' USING ERRCODE = 'raise_exception';
    END IF;
    v_sub := pgque.lock_batch(i_batch_id);
    IF v_sub.sub_id IS NULL THEN
        RAISE EXCEPTION 'batch not found: %', i_batch_id
            USING HINT = 'nack() takes the batch_id of the latest receive() that has not been acked yet.';
    END IF;
    SELECT * INTO v_ev FROM pgque.batch_event_rows(v_sub, NULL, 1, i_msg.msg_id);
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    SELECT coalesce(q.queue_max_retries, 5) INTO v_max FROM pgque.queue q WHERE q.queue_id = v_sub.sub_queue;
    IF coalesce(v_ev.ev_retry, 0) >= v_max THEN
        INSERT INTO pgque.dead_letter (dl_queue_id, dl_consumer_id, dl_reason, ev_id, ev_time, ev_txid, ev_owner,
                                       ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_partition)
        VALUES (v_sub.sub_queue, v_sub.sub_consumer, i_reason, v_ev.ev_id, v_ev.ev_time, v_ev.ev_txid, v_sub.sub_id,
                v_ev.ev_retry, v_ev.ev_type, v_ev.ev_data, v_ev.ev_extra1, v_ev.ev_extra2, v_ev.ev_extra3, v_ev.ev_extra4,
                v_ev.ev_partition)
        ON CONFLICT (dl_queue_id, dl_consumer_id, ev_id) DO NOTHING;
        RETURN 1;
    END IF;
    RETURN pgque.event_retry(i_batch_id, i_msg.msg_id, now() + coalesce(i_retry_after, interval '0'));
END;
$$;
