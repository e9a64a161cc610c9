-- pgque.pop_list(i_queue, i_group, i_partitions, i_batch, i_max_partitions,
-- i_lease_seconds, i_auto_ack, i_mode, i_from): the claim core over a list of
-- candidate partitions (ids, in preference order), in ONE set-based
-- statement: lock the free cursors that have an event pending (FOR UPDATE
-- SKIP LOCKED; the others are only read), read their
-- pending events, take up to i_batch messages from at most
-- i_max_partitions partitions (in candidate order), lease them (or, with
-- i_auto_ack, move the cursor past them) in one UPDATE.
-- A cursor serves its open range (lo, hi] while it has events after its
-- position, else the next range (hi, S], S = pg_current_snapshot() taken
-- here, before the claim statement takes its own (a range end may be any
-- snapshot not later than the statement's: what S sees, the statement
-- sees; a transaction in flight at S is in S's xip, so its events fall in
-- the next range, never skipped). No tick is needed: a committed push is
-- claimable at once. Events of a range in (ev_txid, ev_id) order. At most
-- i_batch + 1 events are read per range.
-- delayedProcessing D: only events created at least D ago are taken (a
-- prefix: an unripe event stops the batch). windowBuffer W: a partition
-- whose newest pending event is younger than W is not taken.
-- Expiry (queue_expiry: retentionSeconds with retentionEnabled,
-- maxWaitTimeSeconds): an event created longer ago than that is never
-- taken; it is passed over like an event before a 'from' subscription
-- time (group_expire moves idle cursors past such events at rotation).
-- The group is subscribed (i_mode 'all' (NULL) / 'new', i_from: from a time) and
-- missing cursors seeded on first contact (group_subscribe; group_seed, by
-- the generated function, only when a candidate lacks its cursor).
-- i_lease_seconds NULL: the queue's leaseTime (default 300).
-- Returns: one verdict row per evaluated candidate (message_id NULL):
--   'took' (drained: nothing pending remains; until: lease expiry),
--   'empty' (nothing pending for this group),
--   'leased' (has or may have work that cannot be taken now; until: when
--     to look again: the live lease's expiry, the delay or window end, or
--     now + 100 ms when a concurrent claim holds the row - never 'empty');
-- candidates after the budget was spent get no verdict; then one row per
-- message (verdict NULL) in candidate then event order.
-- Locks: the candidates' cursor rows that are free and have an event
-- pending (FOR UPDATE SKIP LOCKED), as group_seed on first contact.
-- Writes: group_cursor (one UPDATE). A pop that finds nothing pending
-- (once the group is subscribed and its cursors seeded) locks and writes
-- nothing: no transaction id, no WAL.
-- The statement runs in the queue's generated function
-- pgque.pop_list_q<queue>_t<current table> (with windowBuffer:
-- pop_list_w_q<queue>_t<current table>; one candidate without
-- windowBuffer: pop_one_q<queue>_t<current table>, the same claim as a few
-- small statements; group_plans, group_plan_sql): planned once per
-- session, not per call.
-- Called by: the broker (pop), pop_any, pop_partition, the hot-list.
CREATE OR REPLACE FUNCTION pgque.pop_list(i_queue text, i_group text, i_partitions int[], i_batch int,
                                          i_max_partitions int DEFAULT 1, i_lease_seconds int DEFAULT NULL,
                                          i_auto_ack boolean DEFAULT false, i_mode text DEFAULT NULL,
                                          i_from timestamptz DEFAULT NULL)
RETURNS TABLE (partition_id int, partition_uuid uuid, partition_name text, verdict text, drained boolean,
               until timestamptz, lease_id uuid, message_id uuid, transaction_id text, payload text,
               created_at timestamptz, delivery_attempt int, ev_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pgque, pg_temp
AS $$
DECLARE
    v_queue  pgque.queue;
    v_group  int;
    v_snap   pg_snapshot;
    v_window int;
BEGIN
    SELECT * INTO v_queue FROM pgque.queue WHERE queue_name = i_queue;
    IF NOT FOUND THEN
        v_queue := pgque.find_queue(i_queue); -- raises: no such queue
    END IF;
    IF i_partitions IS NULL OR i_batch IS NULL OR i_batch < 1 OR i_max_partitions IS NULL OR i_max_partitions < 1
       OR i_lease_seconds < 1 THEN
        RAISE EXCEPTION 'pgque: pop_list needs candidate partitions, batch >= 1, max partitions >= 1, lease seconds >= 1 (got %, %, %, %)',
            coalesce(cardinality(i_partitions)::text, 'NULL'), coalesce(i_batch::text, 'NULL'),
            coalesce(i_max_partitions::text, 'NULL'), coalesce(i_lease_seconds::text, 'default')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A subscribed group (every call after the first contact) is looked up
    -- here, one probe; group_subscribe (name and mode checks, first-contact
    -- subscription) runs otherwise, and for a mode it must reject.
    IF coalesce(i_mode, '') IN ('', 'all', 'new', 'new-only') THEN
        SELECT g.grp_id INTO v_group
          FROM pgque.broker_group g
          JOIN pgque.group_subscription gs ON gs.gs_queue = v_queue.queue_id AND gs.gs_group = g.grp_id
         WHERE g.grp_name = i_group;
    END IF;
    IF v_group IS NULL THEN
        v_group := pgque.group_subscribe(v_queue.queue_id, i_group, i_mode, i_from);
    END IF;
    IF cardinality(i_partitions) = 0 THEN
        RETURN;
    END IF;
    -- the next range's end: the current snapshot (a simple expression:
    -- evaluated with a snapshot of its own, older than the claim's)
    v_snap := pg_current_snapshot();
    -- the options as broker_options reads them (its defaults), without
    -- building its object
    v_window := coalesce((v_queue.queue_options ->> 'window_buffer')::int, 0);
    -- The claim statement: pgque.pop_list_q<queue>_t<current table>, a
    -- generated function (group_plans) reading the current and the previous
    -- event table (the oldest one is switched out only once every cursor
    -- has passed it, maint_rotate_tables_step1), planned once per session;
    -- pop_one_q<queue>_t<table>, its single-candidate form, for one
    -- candidate without windowBuffer.
    RETURN QUERY EXECUTE format('SELECT * FROM pgque.%I($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)',
                                CASE WHEN v_window > 0 THEN 'pop_list_w_q'
                                     WHEN cardinality(i_partitions) = 1 THEN 'pop_one_q'
                                     ELSE 'pop_list_q' END
                                || v_queue.queue_id || '_t' || v_queue.queue_cur_table)
    USING v_queue.queue_id, v_group, i_partitions, i_batch, i_max_partitions, coalesce(i_auto_ack, false),
          NULL::bigint, v_snap, make_interval(secs => coalesce((v_queue.queue_options ->> 'delayed_processing')::int, 0)),
          make_interval(secs => v_window), gen_random_uuid(),
          make_interval(secs => coalesce(i_lease_seconds, (v_queue.queue_options ->> 'lease_time')::int, 300)),
          now() - pgque.queue_expiry(v_queue.queue_options);
END;
$$;
