package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// Tenancy: a queue's identity is (tenant, name). The default tenant ("")
// stores a queue under its own name; another tenant's queue is stored as
// "<tenant>␟<name>" (U+241F: queue names may not hold control characters,
// so not the wake key's queuekey.Sep), so tenants never see each other's queues.
// Client names and tenants may not contain U+241F.
const tenantSep = "\u241f"

// Name limits: a client's queue name is at most MaxQueueNameBytes (Queen's
// VARCHAR(255)), a tenant at most MaxTenantBytes, so a stored name
// (tenant + U+241F + name) fits the engine's 322 bytes (pgque.queue).
const (
	MaxQueueNameBytes = 255
	MaxTenantBytes    = 64
)

// checkTenant refuses a tenant (token claim or tenant header) over
// MaxTenantBytes.
func checkTenant(t string) error {
	if len(t) > MaxTenantBytes {
		return badRequest(fmt.Sprintf("the tenant is %d bytes; the limit is %d", len(t), MaxTenantBytes))
	}
	return nil
}

// storeName is the stored queue name of a client's queue name.
func storeName(r *http.Request, queue string) (string, error) {
	if err := checkName("queue name", queue); err != nil {
		return "", err
	}
	if len(queue) > MaxQueueNameBytes {
		return "", badRequest(fmt.Sprintf("queue name is %d bytes; the limit is %d", len(queue), MaxQueueNameBytes))
	}
	t := tenantOf(r)
	if t == "" || queue == "" {
		return queue, nil
	}
	return t + tenantSep + queue, nil
}

// clientName maps a stored queue name back; ok is false when the queue
// belongs to another tenant.
func clientName(r *http.Request, stored string) (string, bool) {
	t := tenantOf(r)
	tn, name, scoped := strings.Cut(stored, tenantSep)
	if t == "" {
		return stored, !scoped
	}
	if !scoped || tn != t {
		return "", false
	}
	return name, true
}

// splitStored splits a stored queue name into tenant and client name.
func splitStored(stored string) (tenant, queue string) {
	if t, q, ok := strings.Cut(stored, tenantSep); ok {
		return t, q
	}
	return "", stored
}

// gateKey is the wake gate (and hot-list) key of a stored queue name:
// queuekey.Make(tenant, name).
func gateKey(stored string) string {
	t, q := splitStored(stored)
	return queuekey.Make(t, q)
}

// storedOfKey undoes gateKey: the stored queue name of a gate / hot-list
// key.
func storedOfKey(key string) string {
	t, q := queuekey.Split(key)
	if t == "" {
		return q
	}
	return t + tenantSep + q
}

// scopeOf confines the request's database calls that take an id or a
// label to its tenant's queues (the default tenant's too: a token without a
// tenant reaches no tenant's queue).
func scopeOf(r *http.Request) broker.Scope { return broker.InTenant(tenantOf(r)) }
