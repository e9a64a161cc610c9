package httpapi

import (
	"net/http"
	"strings"

	"github.com/pgquectl/pgquectl/internal/wake"
)

// Tenancy: a queue's identity is (tenant, name). The default tenant ("")
// stores a queue under its own name; another tenant's queue is stored as
// "<tenant>\x1f<name>" (the wake key's bytes), so tenants never see each
// other's queues. Client names may not contain \x1f.

// storeName is the stored queue name of a client's queue name.
func storeName(r *http.Request, queue string) (string, error) {
	if strings.ContainsRune(queue, 0x1f) {
		return "", badRequest("queue name must not contain control character 0x1f")
	}
	t := tenantOf(r)
	if t == "" || queue == "" {
		return queue, nil
	}
	return t + "\x1f" + queue, nil
}

// clientName maps a stored queue name back; ok is false when the queue
// belongs to another tenant.
func clientName(r *http.Request, stored string) (string, bool) {
	t := tenantOf(r)
	tn, name, scoped := strings.Cut(stored, "\x1f")
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
	if t, q, ok := strings.Cut(stored, "\x1f"); ok {
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
