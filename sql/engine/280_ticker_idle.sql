-- pgque.ticker_idle(): whether a ticker round (ticker(), ticker_loop()) can
-- be skipped: nothing is due, no tick and no retry. Two states, recorded by
-- ticker_plan's last due check in this session in the session setting
-- pgque.ticker_idle, '<until>|<snapshot>|<push until>' (epoch seconds):
--  * quiet: the check found nothing due and the queues quiet, no
--    transaction has ended since (the cluster's snapshot is the same:
--    nothing was committed anywhere - no event, no queue or setting
--    change, no retry added) and now() is before <until>
--    (ticker_idle_until: the first due by time alone: an idle-period tick,
--    a classic back-off tick, a retry). An event committed after the check
--    makes the next round a full one: it is ticked within one round of its
--    commit, as without this path. A producer that allocated ids and has
--    not committed is ticked at its commit instead of at the next period
--    slot (due_queues would tick and wait for it);
--  * push: the check found nothing due and no classic consumer exists
--    (ticker_push_idle_until) and now() is before <push until> (the first
--    tick due by time, ticker_max_lag of new events at the latest). Events
--    may have been committed meanwhile: consumer groups need no ticks, and
--    those events are ticked by <push until>. It keeps a round cheap under
--    a push load, when the snapshot moves every round.
-- The CALLER must also find no ticker_wake row visible (no queue or
-- setting changed, no consumer subscribed since the check: each commits
-- one): a table read, which would keep this function from being inlined
-- (an SQL function that is not inlined is planned again in every
-- transaction: 130 us a round). In the quiet state the table is empty
-- (the check that recorded it saw it empty, and nothing was committed
-- since): the read is redundant there and costs a few us.
-- Never in a transaction that has written (its own writes are not in the
-- snapshot).
-- Cost: no table read, no lock; one snapshot and a few string operations.
-- An SQL function without SET, every name schema-qualified: the planner
-- inlines it into its caller's expression (a PL/pgSQL call with SET costs
-- more than the rest of an idle round). Never NULL.
-- Locks: none. Writes: nothing.
-- Called by: ticker(), ticker_loop().
CREATE OR REPLACE FUNCTION pgque.ticker_idle()
RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
    SELECT CASE
             WHEN pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL THEN false
             WHEN CASE
                    WHEN pg_catalog.split_part(coalesce(pg_catalog.current_setting('pgque.ticker_idle', true), ''), '|', 2)
                         OPERATOR(pg_catalog.<>) pg_catalog.pg_current_snapshot()::pg_catalog.text
                      OR pg_catalog.split_part(coalesce(pg_catalog.current_setting('pgque.ticker_idle', true), ''), '|', 1)
                         OPERATOR(pg_catalog.=) ANY (ARRAY['', 'seen'])
                    THEN false
                    ELSE pg_catalog.now() OPERATOR(pg_catalog.<) pg_catalog.to_timestamp(
                             pg_catalog.split_part(pg_catalog.current_setting('pgque.ticker_idle', true), '|', 1)::pg_catalog.float8)
                  END
             THEN true
             WHEN pg_catalog.split_part(coalesce(pg_catalog.current_setting('pgque.ticker_idle', true), ''), '|', 3)
                  OPERATOR(pg_catalog.=) ''
             THEN false
             ELSE pg_catalog.now() OPERATOR(pg_catalog.<) pg_catalog.to_timestamp(
                      pg_catalog.split_part(pg_catalog.current_setting('pgque.ticker_idle', true), '|', 3)::pg_catalog.float8)
           END
$$;
