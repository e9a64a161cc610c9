package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// The messages routes (Queen's management surface, queenctl messages):
//   GET    /api/v1/messages                             list (filters, offset paging)
//   GET    /api/v1/messages/{partitionId}/{transactionId} one message
//   DELETE /api/v1/messages/{partitionId}/{transactionId} delete one
// A message is addressed by its partition's UUID and its transactionId
// (its message id works too). A delete marks the message (event rows are
// never changed): consumer groups never receive it again. See
// docs/reference/http.md "Messages".

type busStatus struct {
	ConsumedBy  int `json:"consumedBy"`
	TotalGroups int `json:"totalGroups"`
}

type listedMessage struct {
	ID             string          `json:"id"`
	TransactionID  string          `json:"transactionId"`
	PartitionID    string          `json:"partitionId"`
	QueuePath      string          `json:"queuePath"`
	Queue          string          `json:"queue"`
	Partition      string          `json:"partition"`
	Namespace      *string         `json:"namespace"`
	Task           *string         `json:"task"`
	Status         string          `json:"status"`
	QueueStatus    string          `json:"queueStatus"`
	BusStatus      busStatus       `json:"busStatus"`
	TraceID        *string         `json:"traceId"`
	ProducerSub    *string         `json:"producerSub"`
	QueuePriority  json.RawMessage `json:"queuePriority"`
	CreatedAt      string          `json:"createdAt"`
	LeaseExpiresAt *string         `json:"leaseExpiresAt"`
	Data           json.RawMessage `json:"data"`
	Payload        json.RawMessage `json:"payload"`
}

type modeJSON struct {
	HasQueueMode   bool   `json:"hasQueueMode"`
	BusGroupsCount int    `json:"busGroupsCount"`
	Type           string `json:"type"`
}

type listResponse struct {
	Messages []listedMessage `json:"messages"`
	Mode     modeJSON        `json:"mode"`
	Total    int             `json:"total"`
}

// listMode is Queen's listing mode type: none, queue, bus or hybrid.
func listMode(m broker.Mode) modeJSON {
	t := "none"
	switch {
	case m.HasQueueMode && m.BusGroups > 0:
		t = "hybrid"
	case m.HasQueueMode:
		t = "queue"
	case m.BusGroups > 0:
		t = "bus"
	}
	return modeJSON{HasQueueMode: m.HasQueueMode, BusGroupsCount: m.BusGroups, Type: t}
}

// labelName maps a stored namespace / task label back to the client's
// (labels are stored tenant-scoped, like queue names: labelFor).
func labelName(r *http.Request, stored string) *string {
	if stored == "" {
		return nil
	}
	if t := tenantOf(r); t != "" {
		stored = strings.TrimPrefix(stored, t+labelSep)
	}
	return &stored
}

func isoOrNil(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := isoMillis(*t)
	return &s
}

func rawOrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func timeParam(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, badRequest(name + " must be an ISO-8601 timestamp")
	}
	return t, nil
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	f := broker.MessageFilter{Tenant: tenantOf(r), Partition: qs.Get("partition"), Status: qs.Get("status")}
	var err error
	if f.Queue, err = storeName(r, qs.Get("queue")); err != nil {
		return err
	}
	ns := qs.Get("namespace")
	if ns == "" {
		ns = qs.Get("ns") // Queen's alias
	}
	f.Namespace, f.Task = labelFor(f.Tenant, ns), labelFor(f.Tenant, qs.Get("task"))
	if f.From, err = timeParam(r, "from"); err != nil {
		return err
	}
	if f.To, err = timeParam(r, "to"); err != nil {
		return err
	}
	if f.Limit, err = intParam(r, "limit", 200, 1); err != nil {
		return err
	}
	if f.Offset, err = intParam(r, "offset", 0, 0); err != nil {
		return err
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	list, mode, err := broker.ListMessages(ctx, s.pool, f)
	if err != nil {
		return err
	}
	out := listResponse{Messages: make([]listedMessage, 0, len(list)), Mode: listMode(mode)}
	for _, m := range list {
		queue, ok := clientName(r, m.Queue)
		if !ok {
			continue // never: the SQL scopes by tenant
		}
		data := rawOrNull(m.Data)
		out.Messages = append(out.Messages, listedMessage{ID: m.MessageID, TransactionID: m.TransactionID,
			PartitionID: m.PartitionUUID, QueuePath: queue + "/" + m.Partition, Queue: queue, Partition: m.Partition,
			Namespace: labelName(r, m.Namespace), Task: labelName(r, m.Task), Status: m.Status, QueueStatus: m.Status,
			BusStatus:     busStatus{ConsumedBy: m.ConsumedBy, TotalGroups: m.TotalGroups},
			QueuePriority: rawOrNull(m.Priority), CreatedAt: isoMillis(m.CreatedAt),
			LeaseExpiresAt: isoOrNil(m.QueueLease), Data: data, Payload: data})
	}
	out.Total = len(out.Messages)
	writeJSON(w, http.StatusOK, out)
	return nil
}

type groupJSON struct {
	Name           string  `json:"name"`
	Consumed       bool    `json:"consumed"`
	LeaseExpiresAt *string `json:"leaseExpiresAt"`
}

type messageDetail struct {
	ID             string          `json:"id"`
	TransactionID  string          `json:"transactionId"`
	Data           json.RawMessage `json:"data"`
	Payload        json.RawMessage `json:"payload"`
	TraceID        *string         `json:"traceId"`
	ProducerSub    *string         `json:"producerSub"`
	CreatedAt      string          `json:"createdAt"`
	PartitionID    string          `json:"partitionId"`
	Partition      string          `json:"partition"`
	IsEncrypted    bool            `json:"isEncrypted"`
	Queue          string          `json:"queue"`
	QueuePath      string          `json:"queuePath"`
	Namespace      *string         `json:"namespace"`
	Task           *string         `json:"task"`
	Status         string          `json:"status"`
	ErrorMessage   *string         `json:"errorMessage"`
	RetryCount     int             `json:"retryCount"`
	LeaseExpiresAt *string         `json:"leaseExpiresAt"`
	QueueConfig    json.RawMessage `json:"queueConfig"`
	Mode           modeJSON        `json:"mode"`
	ConsumerGroups []groupJSON     `json:"consumerGroups"`
}

// isUUID reports whether s is a UUID in its usual text form (a partition
// id that is not one names no partition: 404, as Queen).
func isUUID(s string) bool {
	h := strings.ReplaceAll(s, "-", "")
	if len(h) != 32 || (len(s) != 32 && len(s) != 36) {
		return false
	}
	for _, c := range h {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

var errMessageNotFound = &apiError{status: http.StatusNotFound, msg: "Message not found"}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) error {
	pid, txn := r.PathValue("partitionId"), r.PathValue("transactionId")
	if !isUUID(pid) {
		return errMessageNotFound
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	d, mode, err := broker.GetMessage(ctx, s.pool, tenantOf(r), pid, txn)
	if errors.Is(err, broker.ErrNotFound) {
		return errMessageNotFound
	}
	if err != nil {
		return err
	}
	queue, ok := clientName(r, d.Queue)
	if !ok {
		return errMessageNotFound // never: the SQL scopes by tenant
	}
	data := rawOrNull(d.Data)
	retries := 0
	if d.RetryCount != nil {
		retries = *d.RetryCount
	}
	t := "queue"
	if mode.BusGroups > 0 {
		t = "bus"
	}
	out := messageDetail{ID: d.MessageID, TransactionID: d.TransactionID, Data: data, Payload: data,
		CreatedAt: isoMillis(d.CreatedAt), PartitionID: d.PartitionUUID, Partition: d.Partition, Queue: queue,
		QueuePath: queue + "/" + d.Partition, Namespace: labelName(r, d.Namespace), Task: labelName(r, d.Task),
		Status: d.Status, ErrorMessage: d.Error, RetryCount: retries, LeaseExpiresAt: isoOrNil(d.QueueLease),
		QueueConfig: rawOrNull(d.Options), Mode: modeJSON{HasQueueMode: mode.HasQueueMode, BusGroupsCount: mode.BusGroups, Type: t},
		ConsumerGroups: make([]groupJSON, 0, len(d.Groups))}
	for _, g := range d.Groups {
		out.ConsumerGroups = append(out.ConsumerGroups, groupJSON{Name: g.Name, Consumed: g.Consumed, LeaseExpiresAt: isoOrNil(g.LeaseUntil)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request) error {
	pid, txn := r.PathValue("partitionId"), r.PathValue("transactionId")
	notFound := func() error {
		writeJSON(w, http.StatusNotFound, map[string]any{"success": false, "partitionId": pid, "transactionId": txn,
			"error":   "Message not found",
			"message": "No message with this address in a queue of this tenant, or it was deleted already"})
		return nil
	}
	if !isUUID(pid) {
		return notFound()
	}
	ctx, cancel := dbCtx(r)
	defer cancel()
	err := broker.DeleteMessage(ctx, s.pool, tenantOf(r), pid, txn)
	if errors.Is(err, broker.ErrNotFound) {
		return notFound()
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "partitionId": pid, "transactionId": txn,
		"message": "Message deleted successfully"})
	return nil
}
