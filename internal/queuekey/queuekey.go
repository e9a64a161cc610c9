// Package queuekey is the one home of a queue's in-memory identity: the
// key "<tenant>\x1f<queue>" that addresses a queue's long-poll wake gate
// (internal/wake) and its hot-list state (internal/hotlist), so one key
// addresses both. Tenant "" is the default tenant; Make(tenant, "") is
// the key of a tenant's label pops (no queue).
//
// The separator is the control character 0x1f, which neither a queue name
// nor a tenant may contain (the HTTP layer refuses both), so Split undoes
// Make. (The name a queue is stored under in PostgreSQL is another thing:
// see internal/httpapi/tenant.go.)
//
// queuekey_test.go fails when the separator is written as a literal in
// any other Go file.
package queuekey

import "strings"

// SepRune separates tenant and queue in a key; Sep is it as a string.
const (
	SepRune = '\x1f'
	Sep     = string(SepRune)
)

// Make is the key of queue of tenant.
func Make(tenant, queue string) string { return tenant + Sep + queue }

// Split undoes Make. A key without a separator is a queue of tenant "".
func Split(key string) (tenant, queue string) {
	if t, q, ok := strings.Cut(key, Sep); ok {
		return t, q
	}
	return "", key
}
