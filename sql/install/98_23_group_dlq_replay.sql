-- pgque.group_dlq_replay(i_id): move a group's dead letter back: it is
-- inserted again into its partition (the queue's current event table) with
-- ev_owner = -group id, so only that group receives it (classic consumers
-- and other groups skip it), and removed from the DLQ. Dedup is not
-- consulted (the same transactionId is the point of a replay).
-- Returns: the new message id, NULL when no such dead letter exists.
-- Locks: the dead-letter row. Writes: event_<q>_<cur>, group_dead_letter.
-- Called by: the broker (POST /api/v1/dlq/:id/replay).
CREATE OR REPLACE FUNCTION pgque.group_dlq_replay(i_id bigint)
RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_dl    pgque.group_dead_letter;
    v_queue pgque.queue;
    v_id    bigint;
BEGIN
    DELETE FROM pgque.group_dead_letter WHERE gdl_id = i_id RETURNING * INTO v_dl;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = v_dl.gdl_queue;
    EXECUTE format('INSERT INTO %s (ev_type, ev_data, ev_extra1, ev_partition, ev_owner) VALUES (''default'', $1, $2, $3, $4) RETURNING ev_id',
                   pgque.event_table(v_queue.queue_id, v_queue.queue_cur_table))
       INTO v_id
      USING v_dl.gdl_data, v_dl.gdl_txn, v_dl.gdl_partition, -v_dl.gdl_group;
    RETURN pgque.message_uuid(v_queue.queue_id, v_id, now());
END;
$$;
