package broker

import "context"

// PopAny is the wildcard pop answered by the SQL candidate scan (hot-list
// off, or a cold start): one call of pgque.pop_any, which finds partitions
// with pending work and no live lease and runs the claim core over them.
func PopAny(ctx context.Context, q Querier, p Pop) (PopResult, error) {
	args := p.args(nil)
	args = append(args[:2], args[3:]...)
	rows, err := q.Query(ctx, `SELECT `+popCols+` FROM pgque.pop_any($1, $2, $3, $4, $5, $6, $7, $8)`, args...)
	return scanPop("pop", rows, err)
}
