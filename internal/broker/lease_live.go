package broker

import "context"

// LeaseLive reports whether leaseID holds at least one live lease (the
// transaction route's requiredLeases). A malformed id is not live.
func LeaseLive(ctx context.Context, q Querier, leaseID string) (bool, error) {
	if !isUUID(leaseID) {
		return false, nil
	}
	var live bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pgque.group_cursor
		WHERE gc_lease = $1::uuid AND gc_lease_until > clock_timestamp())`, leaseID).Scan(&live); err != nil {
		return false, wrap("check lease", err)
	}
	return live, nil
}
