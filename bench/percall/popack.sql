-- bench/percall: a leasing claim of 1 message of partition :pid of queue :q
-- in group g, then the ack of that message under its lease (status
-- completed; it releases the lease at the batch end). Two transactions per
-- pgbench transaction (autocommit). \gset fails the run when the claim
-- found nothing; run.sh checks that every ack moved the position.
SELECT transaction_id AS txn, partition_uuid AS part, lease_id AS lease FROM pgque.pop_list(:q::text, 'g', ARRAY[:pid::int], 1, 1)
 WHERE message_id IS NOT NULL \gset
SELECT count(*) FROM pgque.group_ack('g', ARRAY[:txn::text], ARRAY[:part::uuid], NULL, ARRAY[:lease::uuid], NULL) WHERE success AND NOT noop;
