package broker

import "context"

// LeaseLive reports whether leaseID holds at least one live lease on any
// tenant's queue: LeaseLiveIn with AnyTenant.
func LeaseLive(ctx context.Context, q Querier, leaseID string) (bool, error) {
	return LeaseLiveIn(ctx, q, AnyTenant, leaseID)
}

// LeaseLiveIn reports whether leaseID holds at least one live lease on a
// queue of scope (the transaction route's requiredLeases). A malformed id
// is not live. One call of pgque.group_lease_live.
func LeaseLiveIn(ctx context.Context, q Querier, scope Scope, leaseID string) (bool, error) {
	if !isUUID(leaseID) {
		return false, nil
	}
	var live bool
	if err := q.QueryRow(ctx, `SELECT pgque.group_lease_live($1::uuid, $2)`, leaseID, scope.arg()).Scan(&live); err != nil {
		return false, wrap("check lease", err)
	}
	return live, nil
}
