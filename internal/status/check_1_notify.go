package status

import (
	"context"
	"fmt"

	"github.com/pgquectl/pgquectl/internal/pgstats"

	"github.com/pgquectl/pgquectl/internal/db"
)

// The "notify queue" check: PostgreSQL's NOTIFY queue, filled by a
// listener that does not read (often a LISTEN session stuck in a
// transaction). Thresholds: NotifyWarn / NotifyCrit.

func init() {
	serverChecks = append(serverChecks, serverCheck{
		name:    "notify queue",
		section: SectionNotify,
		collect: func(ctx context.Context, q db.Querier, r *Report) {
			u, err := pgstats.NotifyQueueUsage(ctx, q)
			if err != nil {
				r.Notify.Problems = appendProblem(r.Notify.Problems, "pg_notification_queue_usage()", err, r)
				return
			}
			r.Notify.Usage = u
			r.Notify.Verdict = notifyVerdict(u, r.Thresholds)
		},
		result: func(r *Report) (Verdict, []Problem) { return r.Notify.Verdict, r.Notify.Problems },
		value:  func(r *Report) string { return fmt.Sprintf("%.2f%%", r.Notify.Usage*100) },
	})
}

// NotifySection: PostgreSQL's NOTIFY queue.
type NotifySection struct {
	Usage    float64   `json:"usage"` // 0..1
	Problems []Problem `json:"problems"`
	Verdict
}

// notifyVerdict judges pg_notification_queue_usage().
func notifyVerdict(u float64, t Thresholds) Verdict {
	switch {
	case t.NotifyCrit > 0 && u >= t.NotifyCrit:
		return crit("NOTIFY queue %.1f%% full (CRIT from %.0f%%): a listener is not reading (a LISTEN session stuck in a transaction?)", u*100, t.NotifyCrit*100)
	case t.NotifyWarn > 0 && u >= t.NotifyWarn:
		return warn("NOTIFY queue %.1f%% full (WARN from %.0f%%): a listener is not reading", u*100, t.NotifyWarn*100)
	}
	return ok("NOTIFY queue %.2f%% used", u*100)
}
