package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/wake"
)

// missingRecheck is how often parked pops of a queue that does not exist
// re-check it (shared, see serveResult): the push that creates it through
// any broker opens the gate at once; only a queue created outside the
// brokers (pgque.push in SQL) waits for this.
const missingRecheck = 5 * time.Second

// shareKey is the question a pop's re-check asks beside its gate key (the
// tenant and queue): which kind of pop, its partition or labels, and what
// decides where a new subscription starts. Parked pops with equal gate and
// share keys share their re-checks (wake.Ticket.Check). Batch size,
// partitions, lease and autoAck change what a pop takes, not whether
// there is anything to take.
func shareKey(q popQuery, kind string, parts ...string) string {
	return strings.Join(append([]string{kind, q.pop.Group, q.pop.SubscriptionMode, q.qs.Get("subscriptionFrom")}, parts...), "\x00")
}

// serveResult runs pop attempts until one yields messages, the request
// times out (wait) or after the first attempt (no wait). Between attempts
// no database connection is held: the request parks on the gate key,
// opened by a push to the queue (local or from a peer broker), and
// re-checks with backoff 100 ms ×3, then doubling, capped at 1 s
// (missingRecheck while the queue does not exist). sub, when set,
// subscribes to a second wake source (the hot-list's).
//
// Re-checks are shared: the parked pops of one gate key and share key
// (the same tenant, queue, group, partition or labels) take the answer of
// a check that started after their own last one, or wait for the one
// running, instead of each asking the database; only a check that found
// messages sends the others to check for themselves (there may be more).
// So idle parked pops cost one check per (queue, group, ...) and backoff
// period, not one per pop.
func (s *Server) serveResult(w http.ResponseWriter, r *http.Request, q popQuery, key, share string,
	sub func() (<-chan struct{}, func()), pop popFunc) error {
	if err := checkName("consumerGroup", q.pop.Group); err != nil {
		return err
	}
	deadline := time.Now().Add(q.timeout)
	// A push is answered once committed, and a claim closes its range at
	// its own snapshot: a client that saw its push answered can pop it.
	delay, step := 100*time.Millisecond, 0
	var hot <-chan struct{}
	if sub != nil && q.wait {
		ch, cancel := sub()
		defer cancel()
		hot = ch
	}
	var dbTime, parkTime time.Duration
	// since: only a check that started after it may answer this pop (its
	// arrival, then its last answer or wake-up).
	since := time.Now()
	for {
		t := s.gates.Park(key)
		var queue string
		var res broker.PopResult
		var err error
		check := func() wake.Outcome {
			ctx, cancel := context.WithTimeout(r.Context(), dbTimeout)
			defer cancel()
			if s.maintenance(ctx).Pop { // pop maintenance: empty, no database call
				return wake.Empty
			}
			t0 := time.Now()
			queue, res, err = pop(ctx)
			dbTime += time.Since(t0)
			switch {
			case errors.Is(err, broker.ErrNotFound):
				// A queue that does not exist yet is empty: a consumer may
				// start before its producer (the first push creates it).
				err = nil
				return wake.Missing
			case err != nil || len(res.Messages) > 0:
				return wake.Found
			}
			return wake.Empty
		}
		out, at, ran := t.Check(r.Context(), share, since, check)
		since = at
		if ran {
			s.metrics.checks.WithLabelValues("run").Inc()
		} else {
			s.metrics.checks.WithLabelValues("shared").Inc()
		}
		if ran && err != nil {
			t.Release()
			return err
		}
		if ran {
			s.countVerdicts(res)
		}
		if ran && len(res.Messages) > 0 {
			t.Release()
			s.metrics.popResults.WithLabelValues("messages").Inc()
			setServerTiming(w, timing{"db", dbTime}, timing{"park", parkTime})
			resp := s.popResponse(r, queue, q.pop, res)
			writeEncoded(w, http.StatusOK, func(b []byte) ([]byte, bool) { return appendPopResponse(b, &resp) },
				func() any { return resp })
			return nil
		}
		remaining := time.Until(deadline)
		if !q.wait || remaining <= 0 {
			t.Release()
			s.metrics.popResults.WithLabelValues("empty").Inc()
			setServerTiming(w, timing{"db", dbTime}, timing{"park", parkTime})
			noContent(w)
			return nil
		}
		wait := delay
		if out == wake.Missing {
			wait = max(wait, missingRecheck)
		}
		timer := time.NewTimer(min(time.Until(at.Add(wait)), remaining))
		s.metrics.parked.Inc()
		t1 := time.Now()
		var done bool
		select {
		case <-t.C:
			s.metrics.wakes.Inc()
			since = time.Now()
		case <-hot:
			s.metrics.hotWakes.Inc()
			since = time.Now()
		case <-timer.C:
		case <-r.Context().Done():
			done = true
		case <-s.stopping:
			done = true
		}
		s.metrics.parked.Dec()
		parkTime += time.Since(t1)
		timer.Stop()
		t.Release()
		if done {
			s.metrics.popResults.WithLabelValues("empty").Inc()
			setServerTiming(w, timing{"db", dbTime}, timing{"park", parkTime})
			noContent(w)
			return nil
		}
		if step++; step >= 3 {
			delay = min(delay*2, time.Second)
		}
	}
}
