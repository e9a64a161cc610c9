// Package hotlist answers a wildcard pop's question "which partitions of
// this queue might have work for my consumer group?" from memory, so that
// the cost of a pop does not grow with the number of idle partitions.
//
// The hot-list is a cache that may be wrong in one direction only: stale in
// excess. A listed partition with nothing pending costs one empty claim in
// PostgreSQL; a pending partition that is not listed is a defect, healed at
// the latest by the periodic reseed (a keyset scan of the partitions that
// have work or a live lease).
//
// The package knows neither HTTP nor SQL. The broker plugs it in through
// small interfaces: it asks a CandidateSource for candidates, runs its
// set-based pop-list over them and checks the verdicts back in; it reports
// marks (pushes, commits, dead-letter moves), acks, seeks and group deletes;
// and it implements Reseeder (the SQL reseed) and PeerTransport (LISTEN /
// NOTIFY between brokers of one database). See docs/design/hotlist.md.
package hotlist

import (
	"context"
	"time"
)

// NoID marks a partition whose database id the hot-list has not learned
// yet (it was only named by a push).
const NoID int32 = -1

// Source is where a mark comes from.
type Source uint8

const (
	// SourcePush: a local push. Quiet: the waiters of the queue are woken
	// by the next wake tick (≈5 ms), coalesced.
	SourcePush Source = iota
	// SourceCommit: a transaction that pushed committed. Wakes now.
	SourceCommit
	// SourceDLQ: a dead letter moved back into the queue. Wakes now.
	SourceDLQ
	// SourcePeer: a dirty hint from another broker. Wakes at the tick,
	// never re-broadcast.
	SourcePeer
	// SourceReseed: a row of the reseed scan. Never sent to peers.
	SourceReseed
	// SourcePushWoken: a local push whose waiters the caller wakes itself,
	// at once (the broker opens the queue's wake gate after the push
	// committed, and its long-polls park on that gate too): a mark like
	// SourcePush's but no wake of its own - the quiet one would only wake
	// those waiters a second time, ≈5 ms later, and run the wake loop for
	// it.
	SourcePushWoken
)

func (s Source) String() string {
	switch s {
	case SourcePush, SourcePushWoken:
		return "push"
	case SourceCommit:
		return "commit"
	case SourceDLQ:
		return "dlq"
	case SourcePeer:
		return "peer"
	case SourceReseed:
		return "reseed"
	}
	return "unknown"
}

func (s Source) local() bool {
	return s == SourcePush || s == SourcePushWoken || s == SourceCommit || s == SourceDLQ
}
func (s Source) wakeNow() bool { return s == SourceCommit || s == SourceDLQ }

// PartRef names a partition by whatever the caller knows: its database id
// (NoID when unknown — 0 is a valid id, so build refs with Named, ByUUID
// or ByID rather than a literal that leaves ID 0), its UUID (the HTTP
// API's partitionId) or its name. The hot-list resolves it through what it
// has learned.
type PartRef struct {
	ID   int32
	UUID string
	Name string
}

// Named refers to a partition by name only (a push).
func Named(name string) PartRef { return PartRef{ID: NoID, Name: name} }

// ByUUID refers to a partition by its UUID only (an ack).
func ByUUID(uuid string) PartRef { return PartRef{ID: NoID, UUID: uuid} }

// ByID refers to a partition by database id and name.
func ByID(id int32, name string) PartRef { return PartRef{ID: id, Name: name} }

// Verdict kinds, the same strings the broker's pop-list returns.
const (
	VerdictTook   = "took"
	VerdictEmpty  = "empty"
	VerdictLeased = "leased"
)

// Verdict is what the pop-list found at one candidate. The broker's
// verdict maps field by field (a two-line adapter), so this package does
// not depend on internal/broker and its database driver.
type Verdict struct {
	PartitionID   int32
	PartitionUUID string
	Partition     string
	Kind          string    // VerdictTook, VerdictEmpty, VerdictLeased
	Drained       bool      // took: nothing else was pending
	Until         time.Time // took: lease expiry (zero with auto-ack); leased: revisit time
}

// Request describes one wildcard pop.
type Request struct {
	Key        string // queuekey.Make(tenant, queue)
	Group      string // consumer group ("" is the caller's business: pass its real name)
	Batch      int    // messages wanted (>= 1)
	Partitions int    // most partitions to claim (0 = 1)
	AutoAck    bool
	// Prepare, when set, runs before a cold ring's reseed (by the pop that
	// seeds it): the broker subscribes the group there, so that the
	// reseed judges the group's partitions from its real starting point.
	// An error is returned by Checkout and the ring stays cold.
	Prepare func(ctx context.Context) error
}

// Candidate is one partition handed to the pop-list.
type Candidate struct {
	// ID is the partition's database id, NoID when the hot-list has only
	// seen its name (a push): the broker resolves those by Name.
	ID   int32
	Name string
	// Marks is how many marks the entry collected since it was last
	// cleared (at least 1): a rough count of pending messages.
	Marks int
}

// Checkout is a set of candidates checked out of a source for one pop. The
// caller runs the pop-list over Candidates, then calls CheckIn with the
// verdicts, and always Release (defer it: it is the drop guard and is safe
// on panic and cancellation paths; after CheckIn it does nothing).
type Checkout interface {
	Candidates() []Candidate
	CheckIn(verdicts []Verdict)
	Release()
}

// CandidateSource is what a wildcard pop asks. Two implementations: the
// hot-list (*HotList) and the SQL candidate scan (an adapter in the broker
// whose check-in does nothing).
type CandidateSource interface {
	Checkout(ctx context.Context, req Request) (Checkout, error)
}

// ReseedRow is one row of the reseed scan: a partition that has pending
// work for the group or a live lease.
type ReseedRow struct {
	ID   int32
	UUID string
	Name string
	// LeasedUntil is the live lease's expiry; zero when not leased.
	LeasedUntil time.Time
}

// Reseeder runs the reseed scan for one (queue, group): the rows with id >
// afterID, in id order, at most limit of them. The broker implements it
// with SQL (lease-held partitions included).
type Reseeder interface {
	ReseedPage(ctx context.Context, key, group string, afterID int32, limit int) ([]ReseedRow, error)
}

// Hint is a dirty hint between brokers of one database: "(queue,
// partition) may have new work".
type Hint struct {
	Key       string
	Partition string
	ID        int32 // NoID when unknown
}

// PeerTransport carries hints to the other brokers (the broker uses
// PostgreSQL LISTEN / NOTIFY). Received hints are handed to
// HotList.ReceiveHints.
type PeerTransport interface {
	// HasPeers reports whether any other broker listens; when none does,
	// hints are not even collected.
	HasPeers() bool
	// SendHints delivers a batch; an error drops the batch (counted; the
	// next reseed heals it).
	SendHints(ctx context.Context, hints []Hint) error
}

// QueueOptions are the queue settings that change how marks and verdicts
// act (http-api.md's delayedProcessing and windowBuffer).
type QueueOptions struct {
	Delay  time.Duration // delayedProcessing
	Window time.Duration // windowBuffer
}

// AckOutcome is what an ack did to a partition's lease.
type AckOutcome struct {
	// LeaseReleased: the ack closed the batch (the cursor reached its end).
	LeaseReleased bool
	// Redeliver: messages of the batch come back (status retry, or failed
	// with retries left): the partition has work whatever the claim said.
	Redeliver bool
}
