package broker

import "context"

// LeaseLive reports whether leaseID holds at least one live lease (the
// transaction route's requiredLeases). A malformed id is not live. One
// call of pgque.group_lease_live.
func LeaseLive(ctx context.Context, q Querier, leaseID string) (bool, error) {
	if !isUUID(leaseID) {
		return false, nil
	}
	var live bool
	if err := q.QueryRow(ctx, `SELECT pgque.group_lease_live($1::uuid)`, leaseID).Scan(&live); err != nil {
		return false, wrap("check lease", err)
	}
	return live, nil
}
