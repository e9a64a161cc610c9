-- pgque.dlq_replay(i_dead_letter_id): put a dead letter back into its queue
-- as a new event (new ev_id, retry count 0) for the consumer that gave up on
-- it (or for all consumers when that subscription is gone), and remove it
-- from the dead-letter table. Returns: the new event id.
-- Takes its xid before reading the queue row and checks the table for
-- REPEATABLE READ / SERIALIZABLE callers, as insert_event does.
-- Locks: the dead-letter row. Writes: event table, dead_letter.
-- Called by: operators, dlq_replay_all.
CREATE OR REPLACE FUNCTION pgque.dlq_replay(i_dead_letter_id bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_dl    pgque.dead_letter;
    v_queue pgque.queue;
    v_owner int;
    v_id    bigint;
BEGIN
    SELECT * INTO v_dl FROM pgque.dead_letter WHERE dl_id = i_dead_letter_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgque: dead letter % does not exist', i_dead_letter_id
            USING ERRCODE = 'raise_exception', HINT = 'List them with pgque.dlq_inspect(queue).';
    END IF;
    PERFORM pg_current_xact_id();  -- the xid first, then the queue row (see insert_event)
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = v_dl.dl_queue_id;
    SELECT s.sub_id INTO v_owner FROM pgque.subscription s
     WHERE s.sub_queue = v_dl.dl_queue_id AND s.sub_consumer = v_dl.dl_consumer_id;
    EXECUTE format('INSERT INTO %s (ev_time, ev_owner, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_partition) '
                   'VALUES ($1, $2, 0, $3, $4, $5, $6, $7, $8, $9) RETURNING ev_id',
                   pgque.event_table(v_queue.queue_id, v_queue.queue_cur_table))
       INTO v_id
      USING v_dl.ev_time, v_owner, v_dl.ev_type, v_dl.ev_data, v_dl.ev_extra1, v_dl.ev_extra2,
            v_dl.ev_extra3, v_dl.ev_extra4, v_dl.ev_partition;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM pgque.check_insert_table(v_queue.queue_id, v_queue.queue_cur_table, v_queue.queue_ntables);
    END IF;
    DELETE FROM pgque.dead_letter WHERE dl_id = i_dead_letter_id;
    RETURN v_id;
END;
$$;
