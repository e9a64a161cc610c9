package broker

import (
	"context"
	"time"
)

// Candidate is a partition that probably has work for a group.
type Candidate struct {
	PartitionID   int32
	PartitionUUID string
	Partition     string
	LeaseUntil    time.Time // zero unless a live lease holds it
}

// Reseed returns one keyset page (partition id > after, at most limit) of
// the partitions probably pending for (queue, group), lease-held ones
// included: the hot-list's reseed floor. after < 0 starts at the beginning.
// One call of pgque.group_reseed.
func Reseed(ctx context.Context, q Querier, queue, group string, after int32, limit int) ([]Candidate, error) {
	var afterArg *int32
	if after >= 0 {
		afterArg = &after
	}
	rows, err := q.Query(ctx, `SELECT partition_id, partition_uuid::text, partition_name, lease_until
		FROM pgque.group_reseed($1, $2, $3, $4)`, queue, group, afterArg, limit)
	if err != nil {
		return nil, wrap("reseed", err)
	}
	defer rows.Close()
	var out []Candidate
	for rows.Next() {
		var c Candidate
		var until *time.Time
		if err := rows.Scan(&c.PartitionID, &c.PartitionUUID, &c.Partition, &until); err != nil {
			return nil, wrap("reseed", err)
		}
		if until != nil {
			c.LeaseUntil = *until
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("reseed", err)
	}
	return out, nil
}
