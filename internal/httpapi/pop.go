package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// popQuery is the parsed query string of a pop.
type popQuery struct {
	pop     broker.Pop
	wait    bool
	timeout time.Duration
	qs      url.Values // the query string, parsed once
}

func intParam(r *http.Request, name string, def, minimum int) (int, error) {
	return intValue(r.URL.Query(), name, def, minimum)
}

func intValue(qs url.Values, name string, def, minimum int) (int, error) {
	v := qs.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < minimum || n > math.MaxInt32 {
		return 0, badRequest(name + " must be an integer between " + strconv.Itoa(minimum) + " and 2147483647")
	}
	return n, nil
}

func boolValue(qs url.Values, name string) (bool, error) {
	v := qs.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest(name + " must be true or false")
	}
	return b, nil
}

func (s *Server) parsePop(r *http.Request) (popQuery, error) {
	qs := r.URL.Query()
	q := popQuery{qs: qs}
	var err error
	if q.pop.Batch, err = intValue(qs, "batch", 200, 1); err != nil {
		return q, err
	}
	if q.pop.MaxPartitions, err = intValue(qs, "partitions", 1, 1); err != nil {
		return q, err
	}
	if q.pop.LeaseSeconds, err = intValue(qs, "leaseSeconds", 0, 0); err != nil {
		return q, err
	}
	if q.pop.AutoAck, err = boolValue(qs, "autoAck"); err != nil {
		return q, err
	}
	if q.wait, err = boolValue(qs, "wait"); err != nil {
		return q, err
	}
	ms, err := intValue(qs, "timeout", 30000, 0)
	if err != nil {
		return q, err
	}
	q.timeout = min(time.Duration(ms)*time.Millisecond, s.cfg.LongPollMax)
	q.pop.Group = qs.Get("consumerGroup")
	q.pop.SubscriptionMode = s.requestMode(qs.Get("subscriptionMode"))
	switch from := qs.Get("subscriptionFrom"); from {
	case "":
	case "now":
		t := time.Now()
		q.pop.SubscriptionFrom = &t
	default:
		t, err := time.Parse(time.RFC3339Nano, from)
		if err != nil {
			return q, badRequest("subscriptionFrom must be now or an ISO-8601 timestamp")
		}
		q.pop.SubscriptionFrom = &t
	}
	return q, nil
}

// popFunc runs one pop attempt: the queue that served (stored name) and
// what it took.
type popFunc func(ctx context.Context) (string, broker.PopResult, error)

func (s *Server) popQueue(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parsePop(r)
	if err != nil {
		return err
	}
	if q.pop.Queue, err = storeName(r, r.PathValue("queue")); err != nil {
		return err
	}
	var sub func() (<-chan struct{}, func())
	if s.hot != nil {
		// The hot-list also wakes the parked pop: due revisits, promoted
		// acks, reseeds that found work, peer hints.
		sub = func() (<-chan struct{}, func()) { return s.hot.Subscribe(q.pop.Queue) }
	}
	return s.serveResult(w, r, q, gateKey(q.pop.Queue), shareKey(q, "queue"), sub, func(ctx context.Context) (string, broker.PopResult, error) {
		res, err := s.cands.Pop(ctx, s.pool, q.pop)
		return q.pop.Queue, res, err
	})
}

func (s *Server) popPartition(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parsePop(r)
	if err != nil {
		return err
	}
	if q.pop.Queue, err = storeName(r, r.PathValue("queue")); err != nil {
		return err
	}
	part := r.PathValue("partition")
	if err := checkName("partition", part); err != nil {
		return err
	}
	return s.serveResult(w, r, q, gateKey(q.pop.Queue), shareKey(q, "partition", part), nil, func(ctx context.Context) (string, broker.PopResult, error) {
		res, err := broker.PopPartition(ctx, s.pool, q.pop, part)
		return q.pop.Queue, res, err
	})
}

func (s *Server) popLabel(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parsePop(r)
	if err != nil {
		return err
	}
	ns, task := q.qs.Get("namespace"), q.qs.Get("task")
	if ns == "" && task == "" {
		return badRequest("namespace or task is required")
	}
	if err := errors.Join(checkName("namespace", ns), checkName("task", task)); err != nil {
		return err
	}
	tenant := tenantOf(r)
	return s.serveResult(w, r, q, queuekey.Make(tenant, ""), shareKey(q, "label", ns, task), nil, func(ctx context.Context) (string, broker.PopResult, error) {
		// Labels are stored tenant-scoped (configure), so a tenant's
		// label pop only finds that tenant's queues; the SQL pops only the
		// caller's tenant's queues besides.
		return broker.PopByLabelIn(ctx, s.pool, scopeOf(r), labelFor(tenant, ns), labelFor(tenant, task), q.pop)
	})
}

// labelSep joins a tenant and a namespace / task label, as tenantSep
// joins a tenant and a queue name.
const labelSep = tenantSep

// labelFor scopes a namespace / task label to a tenant ("" stays "").
func labelFor(tenant, label string) string {
	if tenant == "" || label == "" {
		return label
	}
	return tenant + labelSep + label
}

func (s *Server) countVerdicts(res broker.PopResult) {
	for _, v := range res.Verdicts {
		s.metrics.verdicts.WithLabelValues(v.Kind).Inc()
	}
}

type popMessage struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	TraceID         *string         `json:"traceId"`
	Data            json.RawMessage `json:"data"`
	ProducerSub     *string         `json:"producerSub"`
	CreatedAt       string          `json:"createdAt"`
	Queue           string          `json:"queue"`
	PartitionID     string          `json:"partitionId"`
	Partition       string          `json:"partition"`
	LeaseID         string          `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
}

type popResponse struct {
	Success           bool         `json:"success"`
	Queue             string       `json:"queue"`
	Partition         string       `json:"partition"`
	PartitionID       string       `json:"partitionId"`
	LeaseID           string       `json:"leaseId"`
	ConsumerGroup     string       `json:"consumerGroup"`
	PartitionsClaimed int          `json:"partitionsClaimed"`
	Messages          []popMessage `json:"messages"`
}

// isoMillis is the wire format of timestamps: UTC with milliseconds.
func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func (s *Server) popResponse(r *http.Request, stored string, p broker.Pop, res broker.PopResult) popResponse {
	group := broker.GroupOrDefault(p.Group)
	queue, _ := clientName(r, stored)
	out := popResponse{Success: true, Queue: queue, ConsumerGroup: group, LeaseID: res.LeaseID,
		Messages: make([]popMessage, len(res.Messages))}
	seen := map[string]bool{}
	for i, m := range res.Messages {
		if i == 0 {
			out.Partition, out.PartitionID = m.Partition, m.PartitionUUID
		}
		seen[m.PartitionUUID] = true
		data := m.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		out.Messages[i] = popMessage{ID: m.ID, TransactionID: m.TransactionID, Data: data,
			CreatedAt: isoMillis(m.CreatedAt), Queue: queue, PartitionID: m.PartitionUUID, Partition: m.Partition,
			LeaseID: m.LeaseID, ConsumerGroup: group, DeliveryAttempt: m.DeliveryAttempt}
	}
	out.PartitionsClaimed = len(seen)
	return out
}
