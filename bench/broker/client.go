package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// client speaks the Queen v1 routes the benchmark uses.
type client struct {
	http *http.Client

	mu    sync.Mutex
	pools map[string]*connPool // pushes: per broker base URL
}

func newClient() *client {
	tr := &http.Transport{MaxIdleConns: 2 * producerSlots, MaxIdleConnsPerHost: producerSlots, IdleConnTimeout: time.Minute,
		DisableCompression: true}
	return &client{http: &http.Client{Transport: tr}, pools: map[string]*connPool{}}
}

func (c *client) close() {
	c.http.CloseIdleConnections()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pools {
		p.closeIdle()
	}
}

// pool returns the push connections of the broker at base.
func (c *client) pool(base string) (*connPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pools[base]; p != nil {
		return p, nil
	}
	p, err := newConnPool(base, producerSlots)
	if err != nil {
		return nil, err
	}
	c.pools[base] = p
	return p, nil
}

// pushItem is one item of POST /api/v1/push.
type pushItem struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
	Payload   any    `json:"payload"`
}

type pushResult struct {
	Status string `json:"status"`
}

type pushRequest struct {
	Items []pushItem `json:"items"`
}

// push posts items (one request, on a kept-alive connection of the
// broker's pool: see connPool) and returns how many were queued.
func (c *client) push(ctx context.Context, base string, items []pushItem) (int, error) {
	body, err := json.Marshal(pushRequest{Items: items})
	if err != nil {
		return 0, err
	}
	p, err := c.pool(base)
	if err != nil {
		return 0, err
	}
	code, timing, raw, err := p.post(ctx, "/api/v1/push", body)
	if err != nil {
		return 0, fmt.Errorf("push: %w", err)
	}
	if t, ok := ctx.Value(timingKey{}).(srvTiming); ok {
		parseServerTiming(timing, t)
	}
	if code != http.StatusCreated {
		return 0, fmt.Errorf("push: HTTP %d: %s", code, bytes.TrimSpace(raw))
	}
	var res []pushResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return 0, fmt.Errorf("push: decoding the answer: %w", err)
	}
	n := 0
	for _, r := range res {
		if r.Status == "queued" {
			n++
		}
	}
	return n, nil
}

// message is one popped message (the fields the benchmark reads).
type message struct {
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	LeaseID       string          `json:"leaseId"`
	Data          json.RawMessage `json:"data"`
}

type popResponse struct {
	Messages []message `json:"messages"`
}

// popOpts are the query parameters of a wildcard pop.
type popOpts struct {
	batch, partitions int
	autoAck, wait     bool
	timeout           time.Duration
	group             string
}

// pop runs GET /api/v1/pop/queue/:queue; 204 gives no messages.
func (c *client) pop(ctx context.Context, base, queue string, o popOpts) ([]message, error) {
	q := url.Values{}
	q.Set("batch", strconv.Itoa(o.batch))
	if o.partitions > 1 {
		q.Set("partitions", strconv.Itoa(o.partitions))
	}
	if o.autoAck {
		q.Set("autoAck", "true")
	}
	if o.wait {
		q.Set("wait", "true")
		q.Set("timeout", strconv.Itoa(int(o.timeout/time.Millisecond)))
	}
	if o.group != "" {
		q.Set("consumerGroup", o.group)
	}
	// A short lease: should a batch ever go unacked (a failed ack), its
	// partition is free again within the next cell.
	q.Set("leaseSeconds", "30")
	var res popResponse
	code, err := c.do(ctx, http.MethodGet, base+"/api/v1/pop/queue/"+url.PathEscape(queue)+"?"+q.Encode(), nil, &res)
	if err != nil {
		return nil, err
	}
	switch code {
	case http.StatusNoContent:
		return nil, nil
	case http.StatusOK:
		return res.Messages, nil
	}
	return nil, fmt.Errorf("pop: HTTP %d", code)
}

type ackItem struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId,omitempty"`
	Status        string `json:"status"`
}

type ackResult struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
}

// ack acknowledges msgs as completed in one POST /api/v1/ack/batch and
// returns how many succeeded.
func (c *client) ack(ctx context.Context, base, group string, msgs []message) (int, error) {
	items := make([]ackItem, len(msgs))
	for i, m := range msgs {
		items[i] = ackItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "completed"}
	}
	body := map[string]any{"acknowledgments": items}
	if group != "" {
		body["consumerGroup"] = group
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	var res []ackResult
	code, err := c.do(ctx, http.MethodPost, base+"/api/v1/ack/batch", raw, &res)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("ack: HTTP %d", code)
	}
	n := 0
	for _, r := range res {
		if r.Success {
			n++
		}
	}
	return n, nil
}

// timingKey is the context key of a *srvTiming sink.
type timingKey struct{}

// srvTiming receives a response's Server-Timing entries (ms by name: a
// push's "db" and "tick", a pop's "db" and "park").
type srvTiming map[string]float64

// withTiming returns ctx carrying a fresh sink for the next request's
// Server-Timing.
func withTiming(ctx context.Context) (context.Context, srvTiming) {
	t := srvTiming{}
	return context.WithValue(ctx, timingKey{}, t), t
}

// parseServerTiming reads `name;dur=ms, ...` into t.
func parseServerTiming(h string, t srvTiming) {
	for _, e := range strings.Split(h, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(e), ";")
		for _, p := range strings.Split(params, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "dur="); ok {
				if ms, err := strconv.ParseFloat(v, 64); err == nil && name != "" {
					t[name] = ms
				}
			}
		}
	}
}

func (c *client) do(ctx context.Context, method, u string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if t, ok := ctx.Value(timingKey{}).(srvTiming); ok {
		parseServerTiming(resp.Header.Get("Server-Timing"), t)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 || resp.StatusCode == http.StatusNoContent {
		if resp.StatusCode >= 400 {
			return resp.StatusCode, fmt.Errorf("%s %s: HTTP %d: %s", method, u, resp.StatusCode, bytes.TrimSpace(raw))
		}
		return resp.StatusCode, nil
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decoding the answer: %w", method, u, err)
		}
	}
	return resp.StatusCode, nil
}
