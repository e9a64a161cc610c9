-- 90_grants.sql: nothing is executable by PUBLIC; each role gets exactly its
-- functions. pgque_admin is a member of pgque_reader and pgque_writer.
-- Runs last (after every function exists); re-runnable.
REVOKE ALL ON ALL ROUTINES IN SCHEMA pgque FROM PUBLIC;
REVOKE ALL ON SCHEMA pgque FROM PUBLIC;
GRANT USAGE ON SCHEMA pgque TO pgque_reader, pgque_writer, pgque_admin;

-- Information, for everybody who uses a queue.
GRANT EXECUTE ON FUNCTION
    pgque.version(),
    pgque.get_queue_info(), pgque.get_queue_info(text),
    pgque.get_consumer_info(), pgque.get_consumer_info(text), pgque.get_consumer_info(text, text),
    pgque.get_batch_info(bigint),
    pgque.status(), pgque.meta_rotation_ms(), pgque.cron_job_suffix(), pgque.cron_job_names(),
    pgque.queue_channel(text)
TO pgque_reader, pgque_writer;

-- Producers.
GRANT EXECUTE ON FUNCTION
    pgque.send(text, jsonb), pgque.send(text, text),
    pgque.send(text, text, jsonb), pgque.send(text, text, text),
    pgque.send_batch(text, jsonb[]), pgque.send_batch(text, text[]),
    pgque.send_batch(text, text, jsonb[]), pgque.send_batch(text, text, text[]),
    pgque.insert_event(text, text, text),
    pgque.insert_event(text, text, text, text, text, text, text)
TO pgque_writer;

-- Consumers.
GRANT EXECUTE ON FUNCTION
    pgque.subscribe(text, text), pgque.unsubscribe(text, text),
    pgque.register_consumer(text, text), pgque.register_consumer_at(text, text, bigint),
    pgque.unregister_consumer(text, text),
    pgque.receive(text, text, int), pgque.ack(bigint),
    pgque.nack(bigint, pgque.message, interval, text),
    pgque.next_batch(text, text), pgque.next_batch_info(text, text),
    pgque.get_batch_events(bigint), pgque.finish_batch(bigint),
    pgque.event_retry(bigint, bigint, timestamptz), pgque.event_retry(bigint, bigint, int)
TO pgque_reader;

-- Administration.
GRANT EXECUTE ON FUNCTION
    pgque.create_queue(text), pgque.drop_queue(text, boolean),
    pgque.set_queue_config(text, text, text),
    pgque.ticker(), pgque.ticker(text), pgque.force_next_tick(text), pgque.force_tick(text),
    pgque.due_queues(int), pgque.tick_need(),
    pgque.maint(), pgque.maint_retry_events(),
    pgque.maint_rotate_tables_step1(text), pgque.maint_rotate_tables_step2(),
    pgque.rotate_metadata(),
    pgque.dlq_inspect(text, int), pgque.dlq_replay(bigint),
    pgque.dlq_replay_all(text), pgque.dlq_purge(text, interval),
    pgque.setting_spec(), pgque.get_setting(text), pgque.set_setting(text, text), pgque.set_tick_period_ms(int),
    pgque.cron_jobs(text), pgque.set_cron_version(text),
    pgque.start(), pgque.stop()
TO pgque_admin;
GRANT EXECUTE ON PROCEDURE pgque.ticker_loop(), pgque.drain_retry_events(int) TO pgque_admin;
-- The advisory-lock ids (04_lock_ids.sql): ticker_loop() runs as its caller
-- and reads its lock's ids through them; constants, nothing else.
GRANT EXECUTE ON FUNCTION
    pgque.lock_id_class(), pgque.lock_id_install(), pgque.lock_id_ticker_leader(),
    pgque.lock_id_metadata_rotation(), pgque.lock_id_ticker_loop(), pgque.lock_id_ticking(),
    pgque.lock_id_queue_tick_class(), pgque.lock_id_subscription_batch_class(),
    pgque.lock_id_partition_intern_class(), pgque.lock_id_push_partition_class(),
    pgque.lock_id_group_seed_class(), pgque.lock_id_subscription_reader_class()
TO pgque_admin;
-- The queue-mode group (045_queue_mode.sql): queue_depth's default argument
-- calls queue_mode_group() as its caller; constants, nothing else.
GRANT EXECUTE ON FUNCTION pgque.queue_mode_group(), pgque.group_name_or_default(text)
TO pgque_reader, pgque_writer;

-- Partitions and consumer groups (the broker's functions, sql/broker/).
GRANT EXECUTE ON FUNCTION
    pgque.message_uuid(int, bigint, timestamptz), pgque.broker_options(jsonb),
    pgque.group_cursor_info(text)
TO pgque_reader, pgque_writer;
GRANT EXECUTE ON FUNCTION
    pgque.push(text[], text[], jsonb[], text[]), pgque.push_route(text, text[])
TO pgque_writer;
GRANT EXECUTE ON FUNCTION
    pgque.pop_list(text, text, int[], int, int, int, boolean, text, timestamptz),
    pgque.pop_any(text, text, int, int, int, boolean, text, timestamptz),
    pgque.pop_by_label(text, text, text, int, int, int, boolean, text, timestamptz, text),
    pgque.pop_partition(text, text, text, int, int, int, boolean, text, timestamptz),
    pgque.group_ack(text, text[], uuid[], text[], uuid[], text[], text), pgque.ack_route(text, uuid, text),
    pgque.group_lease_extend(uuid, int, text),
    pgque.group_reseed(text, text, int, int),
    pgque.group_dlq_list(text, text, int, int, text)
TO pgque_reader;
GRANT EXECUTE ON FUNCTION
    pgque.configure_queue(text, text, text, jsonb), pgque.broker_delete_queue(text),
    pgque.group_seek(text, text, boolean, timestamptz), pgque.group_delete(text, text, boolean),
    pgque.group_dlq_replay(bigint, text), pgque.group_dlq_purge(text, text),
    pgque.group_rotate(), pgque.group_rotation_xmin(int), pgque.group_rotation_pin(int, xid8),
    pgque.group_advance_idle(int), pgque.group_expire(int, xid8)
TO pgque_admin;
-- The broker's read routes and requiredLeases (no table grants needed).
GRANT EXECUTE ON FUNCTION
    pgque.broker_queues(text), pgque.queue_depth(text, text), pgque.broker_queue_detail(text)
TO pgque_reader, pgque_writer;
GRANT EXECUTE ON FUNCTION pgque.group_lease_live(uuid, text) TO pgque_reader;
GRANT EXECUTE ON FUNCTION pgque.group_set_subscription(text, text, text, timestamptz) TO pgque_admin;
GRANT EXECUTE ON FUNCTION pgque.broker_tick(text), pgque.broker_tick(text, bigint[]) TO pgque_admin;
-- Messages (GET / DELETE /api/v1/messages) and the maintenance switches.
GRANT EXECUTE ON FUNCTION
    pgque.message_list(text, text, text, text, text, text, timestamptz, timestamptz, int, int),
    pgque.message_mode(text, text), pgque.message_get(text, uuid, text),
    pgque.broker_maintenance()
TO pgque_reader, pgque_writer;
GRANT EXECUTE ON FUNCTION
    pgque.message_delete(text, uuid, text), pgque.set_broker_maintenance(text, boolean)
TO pgque_admin;
-- rotate_family is called only inside rotate_metadata and group_rotate
-- (SECURITY DEFINER): granted to nobody. So are rotation_due_at (inside
-- rotate_family and group_rotate), ticker_idle_until (inside ticker_plan)
-- and ticker_idle (inside ticker(), and ticker_loop(), which runs as the
-- pg_cron job's owner, a superuser, as it calls ticker_plan).
