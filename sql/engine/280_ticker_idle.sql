-- pgque.ticker_idle(): whether a ticker round (ticker(), ticker_loop()) can
-- be skipped: nothing is due, no tick and no retry. True when ticker_plan's
-- last due check in this session found nothing due and the queues quiet
-- (pgque.ticker_idle: '<until, epoch seconds>|<snapshot>', see
-- ticker_plan), no transaction has ended since that check (the cluster's
-- snapshot is the same: nothing was committed anywhere - no event, no
-- queue or setting change, no retry added) and now() is before the time
-- ticker_idle_until gave (the first due by time alone: an idle-period
-- tick, a classic back-off tick, a retry). Never in a transaction that has
-- written (its own writes are not in the snapshot).
-- An event committed after the check makes the next round a full one: it
-- is ticked within one round of its commit, as without this path (a tick
-- before the commit could not have carried it). A producer that allocated
-- ids and has not committed is ticked at its commit instead of at the next
-- period slot (due_queues would tick and wait for it).
-- Cost: no table read, no lock; one snapshot and a string comparison.
-- An SQL function without SET, every name schema-qualified: the planner
-- inlines it into its caller's expression (a PL/pgSQL call with SET costs
-- more than the rest of an idle round). Never NULL.
-- Locks: none. Writes: nothing. Called by: ticker(), ticker_loop().
CREATE OR REPLACE FUNCTION pgque.ticker_idle()
RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
    SELECT CASE
             WHEN pg_catalog.split_part(coalesce(pg_catalog.current_setting('pgque.ticker_idle', true), ''), '|', 2)
                  OPERATOR(pg_catalog.<>) pg_catalog.pg_current_snapshot()::pg_catalog.text
               OR pg_catalog.split_part(coalesce(pg_catalog.current_setting('pgque.ticker_idle', true), ''), '|', 1)
                  OPERATOR(pg_catalog.=) ANY (ARRAY['', 'seen'])
               OR pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL
             THEN false
             ELSE pg_catalog.now() OPERATOR(pg_catalog.<) pg_catalog.to_timestamp(
                      pg_catalog.split_part(pg_catalog.current_setting('pgque.ticker_idle', true), '|', 1)::pg_catalog.float8)
           END
$$;
