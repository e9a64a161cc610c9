package broker

// Scope confines an operation that takes an id (a partition, a lease, a
// dead letter) or a label to one broker tenant's queues: the SQL function
// filters the queue the id belongs to (pgque.queue_in_tenant), so another
// tenant's id behaves exactly like one that does not exist.
type Scope struct {
	tenant string
	scoped bool
}

// AnyTenant confines nothing: every queue (the engine's own callers,
// administration, tests).
var AnyTenant = Scope{}

// InTenant confines to tenant t's queues, stored as "t␟name"; t = "" is
// the default tenant, whose queues are stored under their own names (names
// without U+241F).
func InTenant(t string) Scope { return Scope{tenant: t, scoped: true} }

// arg is the SQL functions' i_tenant argument (NULL: any tenant).
func (s Scope) arg() *string {
	if !s.scoped {
		return nil
	}
	t := s.tenant
	return &t
}
