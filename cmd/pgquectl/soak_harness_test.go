package main

// What the broker crash soaks (serve_soak_test.go,
// serve_chaos_soak_test.go) share: the soak message and its delivery, and
// the HTTP and SQL helpers.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgquectl/pgquectl/internal/pgtest"
)

const (
	soakLeaseSeconds = 3
	soakPartsPerProd = 4
)

// soakItem is the payload of a soak message: producer and sequence.
type soakItem struct {
	P int `json:"p"`
	S int `json:"s"`
}

// soakDelivery is one message as a consumer received it.
type soakDelivery struct {
	n        int64     // global receipt order
	at       time.Time // received
	asked    time.Time // the pop request was sent (the claim came later)
	group    string
	consumer int
	broker   string
	id, txn  string
	part     string
	item     soakItem
	attempt  int
	lease    string
}

type soakPopMsg struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	Data            json.RawMessage `json:"data"`
	PartitionID     string          `json:"partitionId"`
	Partition       string          `json:"partition"`
	LeaseID         string          `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
}

func soakTxn(p, s int) string { return fmt.Sprintf("p%d-%d", p, s) }

// soakPost posts a JSON body and decodes a JSON answer into out.
func soakPost(ctx context.Context, client *http.Client, url string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("answer %q: %w", data, err)
		}
	}
	return resp.StatusCode, nil
}

// countEvents counts the events of queue by ev_extra1 (the transactionId),
// those starting with prefix.
func countEvents(t *testing.T, dsn, queue, prefix string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := pgtest.Conn(t, dsn)
	var tables []string
	err := conn.QueryRow(ctx, `SELECT array_agg(pgque.event_table(queue_id, n)) FROM pgque.queue, generate_series(0, 2) n
		WHERE queue_name = $1`, queue).Scan(&tables)
	if err != nil {
		t.Fatalf("event tables of %s: %v", queue, err)
	}
	var parts []string
	for _, tb := range tables {
		parts = append(parts, "SELECT ev_extra1 FROM "+tb)
	}
	rows, err := conn.Query(ctx, `SELECT ev_extra1, count(*) FROM (`+strings.Join(parts, " UNION ALL ")+`) e
		WHERE ev_extra1 LIKE $1 || '%' GROUP BY 1`, prefix)
	if err != nil {
		t.Fatalf("counting events of %s: %v", queue, err)
	}
	out := map[string]int{}
	for rows.Next() {
		var txn string
		var n int
		if err := rows.Scan(&txn, &n); err != nil {
			t.Fatal(err)
		}
		out[txn] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
