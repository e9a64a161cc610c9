-- pgque.register_consumer(x_queue_name, x_consumer_id): subscribe a consumer
-- to a queue, starting at the latest tick (it sees events of later ticks).
-- pgque.register_consumer_at(x_queue_name, x_consumer_name, x_tick_pos):
-- subscribe at a given tick, or move an existing consumer with no open batch
-- there. Consumer names: 1..255 bytes, no control characters.
-- Returns: 1 registered (or moved), 0 already registered.
-- Locks: the queue's tick lock (serializes registration per queue), the
-- subscription's batch lock when moving it.
-- Writes: consumer, subscription; creates the subscription's delivery
-- sequences (delivery_seqs). Called by: subscribe(), consumers, admins.
CREATE OR REPLACE FUNCTION pgque.register_consumer_at(x_queue_name text, x_consumer_name text, x_tick_pos bigint)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue pgque.queue := pgque.find_queue(x_queue_name, 'raise_exception');
    v_co_id int;
    v_sub   pgque.subscription;
    v_tick  bigint := x_tick_pos;
BEGIN
    IF x_consumer_name IS NULL OR x_consumer_name = '' THEN
        RAISE EXCEPTION 'pgque: consumer name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(x_consumer_name) > 255 THEN
        RAISE EXCEPTION 'pgque: consumer name "%..." is % bytes; the limit is 255', left(x_consumer_name, 20), octet_length(x_consumer_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF x_consumer_name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'pgque: consumer name must not contain control characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(pgque.lock_id_queue_tick_class(), v_queue.queue_id);
    IF v_tick IS NULL THEN
        SELECT max(tick_id) INTO v_tick FROM pgque.tick WHERE tick_queue = v_queue.queue_id;
    ELSIF NOT EXISTS (SELECT 1 FROM pgque.tick WHERE tick_queue = v_queue.queue_id AND tick_id = v_tick) THEN
        RAISE EXCEPTION 'pgque: tick % of queue "%" does not exist (any more)', v_tick, x_queue_name
            USING ERRCODE = 'raise_exception';
    END IF;
    INSERT INTO pgque.consumer (co_name) VALUES (x_consumer_name) ON CONFLICT (co_name) DO NOTHING;
    SELECT co_id INTO v_co_id FROM pgque.consumer WHERE co_name = x_consumer_name;
    SELECT * INTO v_sub FROM pgque.subscription
     WHERE sub_queue = v_queue.queue_id AND sub_consumer = v_co_id;
    IF FOUND THEN
        IF x_tick_pos IS NULL THEN
            RETURN 0;
        END IF;
        PERFORM pg_advisory_xact_lock(pgque.lock_id_subscription_batch_class(), v_sub.sub_id);
        SELECT * INTO v_sub FROM pgque.subscription WHERE sub_id = v_sub.sub_id;
        IF v_sub.sub_batch IS NOT NULL OR (SELECT d.batch_id FROM pgque.delivery_state(v_sub.sub_id) d) IS NOT NULL THEN
            RAISE EXCEPTION 'pgque: consumer "%" has an open batch on queue "%"; finish it before moving the consumer', x_consumer_name, x_queue_name
                USING ERRCODE = 'object_in_use';
        END IF;
        UPDATE pgque.subscription SET sub_last_tick = v_tick, sub_active = now()
         WHERE sub_id = v_sub.sub_id;
        RETURN 1;
    END IF;
    INSERT INTO pgque.subscription (sub_gen, sub_id, sub_queue, sub_consumer, sub_last_tick)
    VALUES (pgque.subscription_gen(), nextval('pgque.subscription_id_seq'), v_queue.queue_id, v_co_id, v_tick)
    RETURNING sub_id INTO v_sub.sub_id;
    PERFORM pgque.delivery_seqs(v_sub.sub_id, true);
    RETURN 1;
END;
$$;

CREATE OR REPLACE FUNCTION pgque.register_consumer(x_queue_name text, x_consumer_id text)
RETURNS int
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT pgque.register_consumer_at(x_queue_name, x_consumer_id, NULL);
$$;
