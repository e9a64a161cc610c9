package httpapi

import (
	"net/http"
	"strings"

	"github.com/pgquectl/pgquectl/internal/wake"
)

// Tenancy: a queue's identity is (tenant, name). The default tenant ("")
// stores a queue under its own name; another tenant's queue is stored as
// "<tenant>␟<name>" (U+241F: queue names may not hold control characters,
// so not the wake key's 0x1f), so tenants never see each other's queues.
// Client names and tenants may not contain U+241F.
const tenantSep = "\u241f"

// storeName is the stored queue name of a client's queue name.
func storeName(r *http.Request, queue string) (string, error) {
	if err := checkName("queue name", queue); err != nil {
		return "", err
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
// wake.Key(tenant, name).
func gateKey(stored string) string {
	t, q := splitStored(stored)
	return wake.Key(t, q)
}

// storedOfKey undoes gateKey: the stored queue name of a gate / hot-list
// key.
func storedOfKey(key string) string {
	t, q, ok := strings.Cut(key, "\x1f")
	if !ok {
		return key
	}
	if t == "" {
		return q
	}
	return t + tenantSep + q
}
