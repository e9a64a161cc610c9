package broker

import (
	"context"
	"time"
)

// ExtendLease extends every live lease held by leaseID to at least now +
// seconds (0 = 60), never shortening one: one call of
// pgque.group_lease_extend. renewed is 0 for an unknown or expired lease.
func ExtendLease(ctx context.Context, q Querier, leaseID string, seconds int) (renewed int, expiresAt time.Time, err error) {
	if !isUUID(leaseID) {
		return 0, time.Time{}, nil
	}
	if seconds == 0 {
		seconds = 60
	}
	var until *time.Time
	if err := q.QueryRow(ctx, `SELECT renewed, expires_at FROM pgque.group_lease_extend($1::uuid, $2)`, leaseID, seconds).
		Scan(&renewed, &until); err != nil {
		return 0, time.Time{}, wrap("extend lease", err)
	}
	if until != nil {
		expiresAt = *until
	}
	return renewed, expiresAt, nil
}
