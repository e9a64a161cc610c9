-- pgque.drop_queue(x_queue_name[, x_force]): drop a queue and all it owns.
-- Refuses while consumers are subscribed unless x_force. Errors (unknown
-- queue, consumers) are P0001, as PgQue's.
-- Returns: 1. Locks: the queue's tick lock, its row, its tables (ACCESS
-- EXCLUSIVE by DROP). Writes: deletes its ticks, subscriptions, retries,
-- dead letters, partitions, its subscriptions' delivery sequences; drops
-- its generated read functions (group_plans).
-- Called by: admins, broker (queue delete).
CREATE OR REPLACE FUNCTION pgque.drop_queue(x_queue_name text, x_force boolean DEFAULT false)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue;
    v_n     int;
BEGIN
    v_queue := pgque.find_queue(x_queue_name, 'raise_exception');
    PERFORM pg_advisory_xact_lock(pgque.lock_id_queue_tick_class(), v_queue.queue_id);
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_id = v_queue.queue_id FOR UPDATE;
    IF NOT x_force AND EXISTS (SELECT 1 FROM pgque.subscription WHERE sub_queue = v_queue.queue_id) THEN
        RAISE EXCEPTION 'pgque: queue "%" still has consumers', x_queue_name
            USING ERRCODE = 'raise_exception',
                  HINT = 'Unregister them first, or call pgque.drop_queue(name, true) to drop it with them.';
    END IF;
    PERFORM pgque.delivery_seqs(s.sub_id, false) FROM pgque.subscription s WHERE s.sub_queue = v_queue.queue_id;
    DELETE FROM pgque.subscription WHERE sub_queue = v_queue.queue_id;
    DELETE FROM pgque.retry_queue WHERE ev_queue = v_queue.queue_id;
    DELETE FROM pgque.dead_letter WHERE dl_queue_id = v_queue.queue_id;
    DELETE FROM pgque.tick WHERE tick_queue = v_queue.queue_id;
    FOR v_n IN 0 .. v_queue.queue_ntables - 1 LOOP
        EXECUTE format('DROP TABLE IF EXISTS %s', pgque.event_table(v_queue.queue_id, v_n));
    END LOOP;
    EXECUTE format('DROP SEQUENCE IF EXISTS %s', v_queue.queue_event_seq);
    EXECUTE format('DROP SEQUENCE IF EXISTS %s', v_queue.queue_tick_seq);
    PERFORM pgque.group_plans(v_queue.queue_id, false);
    DELETE FROM pgque.queue WHERE queue_id = v_queue.queue_id;
    RETURN 1;
END;
$$;
