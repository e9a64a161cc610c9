-- pgque.message_state(i_queue_id, i_part_id, i_ev_id, i_ev_txid, i_ev_time,
-- i_ev_owner): where one event stands for each consumer group subscribed to
-- its queue. passed: the group is done with it - visible in its cursor's
-- gc_lo, created before its gc_from, or at or below its position inside
-- the open range (a partition the group has no cursor for is judged from
-- its subscription: visible in gs_lo or created before gs_from); a replay
-- addressed to another group (ev_owner = -other) counts as passed.
-- lease_until: the expiry of the group's live lease when its leased batch
-- holds the event. Status reads only: not on the pop path.
-- VOLATILE: its statement takes its snapshot after locking the rotated
-- group_cursor children, so a rotation it waited behind committed before
-- it (STABLE, it read with its caller's older snapshot and missed the
-- moved cursor: a leased message read as pending; docs/design/broker.md
-- "Rotation").
-- Returns: (group_name, passed, lease_until), one row per subscribed group.
-- Locks: ACCESS SHARE on the group_cursor children. Writes: nothing.
-- Called by: message_list, message_get.
--
-- pgque.message_status(i_queue_id, i_part_id, i_ev_id, i_ev_txid, i_ev_time,
-- i_ev_owner): one event's status as the HTTP API shows it, from
-- message_state: dead_letter (some group dead-lettered it), completed
-- (every named group passed it; with no named group, the queue-mode group
-- __QUEUE_MODE__ decides), processing (inside a live leased batch of some
-- group), else pending. consumed_by / total_groups count the named groups;
-- queue_lease is __QUEUE_MODE__'s live lease holding it.
-- Returns: (status, consumed_by, total_groups, queue_lease).
-- Locks: none. Writes: nothing. Called by: message_list, message_get.
CREATE OR REPLACE FUNCTION pgque.message_state(i_queue_id int, i_part_id int, i_ev_id bigint, i_ev_txid xid8,
                                               i_ev_time timestamptz, i_ev_owner int)
RETURNS TABLE (group_name text, passed boolean, lease_until timestamptz)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT g.grp_name,
           CASE WHEN i_ev_owner IS NOT NULL AND i_ev_owner <> -g.grp_id THEN true
                WHEN gc.gc_queue IS NULL
                THEN pg_visible_in_snapshot(i_ev_txid, gs.gs_lo)
                     OR coalesce(i_ev_time < gs.gs_from, false)
                ELSE pg_visible_in_snapshot(i_ev_txid, gc.gc_lo)
                     OR coalesce(i_ev_time < gc.gc_from, false)
                     OR (gc.gc_pos_txid IS NOT NULL AND pg_visible_in_snapshot(i_ev_txid, gc.gc_hi)
                         AND (i_ev_txid, i_ev_id) <= (gc.gc_pos_txid, gc.gc_pos)) END,
           CASE WHEN gc.gc_lease IS NOT NULL AND gc.gc_lease_until > now()
                     AND pg_visible_in_snapshot(i_ev_txid, gc.gc_hi)
                     AND NOT pg_visible_in_snapshot(i_ev_txid, gc.gc_lo)
                     AND (gc.gc_pos_txid IS NULL OR (i_ev_txid, i_ev_id) > (gc.gc_pos_txid, gc.gc_pos))
                     AND (i_ev_txid, i_ev_id) <= (gc.gc_end_txid, gc.gc_lease_end)
                THEN gc.gc_lease_until END
      FROM pgque.group_subscription gs
      JOIN pgque.broker_group g ON g.grp_id = gs.gs_group
      LEFT JOIN pgque.group_cursor gc
        ON gc.gc_queue = gs.gs_queue AND gc.gc_group = gs.gs_group AND gc.gc_partition = i_part_id
     WHERE gs.gs_queue = i_queue_id;
$$;

CREATE OR REPLACE FUNCTION pgque.message_status(i_queue_id int, i_part_id int, i_ev_id bigint, i_ev_txid xid8,
                                                i_ev_time timestamptz, i_ev_owner int)
RETURNS TABLE (status text, consumed_by int, total_groups int, queue_lease timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pgque, pg_temp
AS $$
    SELECT CASE WHEN EXISTS (SELECT 1 FROM pgque.group_dead_letter d
                              WHERE d.gdl_queue = i_queue_id AND d.gdl_ev_id = i_ev_id) THEN 'dead_letter'
                WHEN a.bus > 0 AND a.bus_passed = a.bus THEN 'completed'
                WHEN a.bus = 0 AND coalesce(a.q_passed, false) THEN 'completed'
                WHEN a.lease IS NOT NULL THEN 'processing'
                ELSE 'pending' END,
           a.bus_passed::int, a.bus::int, a.qlease
      FROM (SELECT count(*) FILTER (WHERE m.group_name <> pgque.queue_mode_group()) AS bus,
                   count(*) FILTER (WHERE m.group_name <> pgque.queue_mode_group() AND m.passed) AS bus_passed,
                   bool_or(m.group_name = pgque.queue_mode_group() AND m.passed) AS q_passed,
                   max(m.lease_until) AS lease,
                   max(m.lease_until) FILTER (WHERE m.group_name = pgque.queue_mode_group()) AS qlease
              FROM pgque.message_state(i_queue_id, i_part_id, i_ev_id, i_ev_txid, i_ev_time, i_ev_owner) m) a;
$$;
