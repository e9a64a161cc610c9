package broker

import (
	"context"
	"time"
)

// ExtendLease is ExtendLeaseIn on any tenant's queues (AnyTenant).
func ExtendLease(ctx context.Context, q Querier, leaseID string, seconds int) (renewed int, expiresAt time.Time, err error) {
	return ExtendLeaseIn(ctx, q, AnyTenant, leaseID, seconds)
}

// ExtendLeaseIn extends every live lease held by leaseID on scope's queues
// to at least now + seconds (0 = 60), never shortening one: one call of
// pgque.group_lease_extend. renewed is 0 for an unknown or expired lease
// (or another tenant's).
func ExtendLeaseIn(ctx context.Context, q Querier, scope Scope, leaseID string, seconds int) (renewed int, expiresAt time.Time, err error) {
	if !isUUID(leaseID) {
		return 0, time.Time{}, nil
	}
	if seconds == 0 {
		seconds = 60
	}
	var until *time.Time
	if err := q.QueryRow(ctx, `SELECT renewed, expires_at FROM pgque.group_lease_extend($1::uuid, $2, $3)`, leaseID, seconds, scope.arg()).
		Scan(&renewed, &until); err != nil {
		return 0, time.Time{}, wrap("extend lease", err)
	}
	if until != nil {
		expiresAt = *until
	}
	return renewed, expiresAt, nil
}
