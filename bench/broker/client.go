package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// client speaks the Queen v1 routes the throughput, wildcard and
// many-consumer cells use, over pooled kept-alive connections (wire.go).
// The latency cells run their load in a process of their own
// (loadclient.go), on connections of its own.
type client struct {
	mu    sync.Mutex
	pools map[string]*connPool // per broker base URL
}

// poolIdle bounds the idle connections kept per broker.
const poolIdle = 256

func newClient() *client { return &client{pools: map[string]*connPool{}} }

func (c *client) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pools {
		p.closeIdle()
	}
}

// pool returns the connections of the broker at base.
func (c *client) pool(base string) (*connPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pools[base]; p != nil {
		return p, nil
	}
	p, err := newConnPool(base, poolIdle)
	if err != nil {
		return nil, err
	}
	c.pools[base] = p
	return p, nil
}

func (c *client) do(ctx context.Context, base, method, path string, body []byte) (answer, error) {
	p, err := c.pool(base)
	if err != nil {
		return answer{}, err
	}
	a, err := p.do(ctx, method, path, body)
	if err != nil {
		return a, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return a, nil
}

// push posts items in one request and returns how many were queued.
func (c *client) push(ctx context.Context, base string, items []pushItem) (int, error) {
	a, err := c.do(ctx, base, http.MethodPost, "/api/v1/push", appendPushBody(nil, items))
	if err != nil {
		return 0, err
	}
	return pushAnswer(a)
}

// pushAnswer checks a push's answer and counts the items queued.
func pushAnswer(a answer) (int, error) {
	if a.status != http.StatusCreated {
		return 0, fmt.Errorf("push: HTTP %d: %s", a.status, bytes.TrimSpace(a.body))
	}
	var res []pushStatus
	n, err := queuedCount(a.body, &res)
	if err != nil {
		return 0, fmt.Errorf("push: decoding the answer: %w", err)
	}
	return n, nil
}

// popOpts are the query parameters of a wildcard pop.
type popOpts struct {
	batch, partitions int
	autoAck, wait     bool
	timeout           time.Duration
	group             string
}

// popPath is the request path of a wildcard pop on queue: the query Queen's
// clients send (batch, wait, timeout, consumerGroup, autoAck) plus this
// broker's partitions (how many partitions one pop may claim) and
// leaseSeconds.
func popPath(queue string, o popOpts) string {
	q := url.Values{}
	q.Set("batch", strconv.Itoa(o.batch))
	if o.partitions > 1 {
		q.Set("partitions", strconv.Itoa(o.partitions))
	}
	if o.autoAck {
		q.Set("autoAck", "true")
	}
	q.Set("wait", strconv.FormatBool(o.wait))
	if o.wait {
		q.Set("timeout", strconv.Itoa(int(o.timeout/time.Millisecond)))
	}
	if o.group != "" {
		q.Set("consumerGroup", o.group)
	}
	// A short lease: should a batch ever go unacked (a failed ack), its
	// partition is free again within the next cell.
	q.Set("leaseSeconds", "30")
	return "/api/v1/pop/queue/" + url.PathEscape(queue) + "?" + q.Encode()
}

// popAnswer decodes a pop's answer: 204 gives no messages.
func popAnswer(a answer) ([]message, error) {
	switch a.status {
	case http.StatusNoContent:
		return nil, nil
	case http.StatusOK:
		var res popResponse
		if err := json.Unmarshal(a.body, &res); err != nil {
			return nil, fmt.Errorf("pop: decoding the answer: %w", err)
		}
		return res.Messages, nil
	}
	return nil, fmt.Errorf("pop: HTTP %d: %s", a.status, bytes.TrimSpace(a.body))
}

// pop runs GET /api/v1/pop/queue/:queue.
func (c *client) pop(ctx context.Context, base, queue string, o popOpts) ([]message, error) {
	a, err := c.do(ctx, base, http.MethodGet, popPath(queue, o), nil)
	if err != nil {
		return nil, err
	}
	return popAnswer(a)
}

// ackAnswer checks an ack's answer and counts the items that succeeded.
func ackAnswer(a answer) (int, error) {
	if a.status != http.StatusOK {
		return 0, fmt.Errorf("ack: HTTP %d: %s", a.status, bytes.TrimSpace(a.body))
	}
	var res []ackResult
	if err := json.Unmarshal(a.body, &res); err != nil {
		return 0, fmt.Errorf("ack: decoding the answer: %w", err)
	}
	n := 0
	for _, r := range res {
		if r.Success {
			n++
		}
	}
	return n, nil
}

// ack acknowledges msgs as completed in one POST /api/v1/ack/batch and
// returns how many succeeded.
func (c *client) ack(ctx context.Context, base, group string, msgs []message) (int, error) {
	a, err := c.do(ctx, base, http.MethodPost, "/api/v1/ack/batch", appendAckBody(nil, group, msgs))
	if err != nil {
		return 0, err
	}
	return ackAnswer(a)
}
