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

// PopByLabel is PopByLabelIn over every tenant's queues (AnyTenant).
func PopByLabel(ctx context.Context, q Querier, namespace, task string, p Pop) (queue string, res PopResult, err error) {
	return PopByLabelIn(ctx, q, AnyTenant, namespace, task, p)
}

// PopByLabelIn pops across scope's queues labelled with namespace and / or
// task (Configure; "" = any): the wildcard pop of each in name order until
// one yields messages. One call of pgque.pop_by_label (Pop.Queue is
// ignored). It returns the queue that served, "" when none did (then res
// is empty).
func PopByLabelIn(ctx context.Context, q Querier, scope Scope, namespace, task string, p Pop) (queue string, res PopResult, err error) {
	a := p.args(nil)
	args := []any{strOrNil(namespace), strOrNil(task), a[1], a[3], a[4], a[5], a[6], a[7], a[8], scope.arg()}
	rows, err := q.Query(ctx, `SELECT queue_name, `+popCols+` FROM pgque.pop_by_label($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, args...)
	if err != nil {
		return "", res, wrap("pop by label", err)
	}
	defer rows.Close()
	byQueue := map[string]*PopResult{}
	for rows.Next() {
		var qn string
		row, err := scanPopRow(rows, &qn)
		if err != nil {
			return "", res, wrap("pop by label", err)
		}
		if byQueue[qn] == nil {
			byQueue[qn] = &PopResult{}
		}
		row.into(byQueue[qn])
		if row.msg != nil {
			queue = qn
		}
	}
	if err := rows.Err(); err != nil {
		return "", res, wrap("pop by label", err)
	}
	if queue == "" {
		return "", PopResult{}, nil
	}
	return queue, *byQueue[queue], nil
}
