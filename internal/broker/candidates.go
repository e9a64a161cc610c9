package broker

import "context"

// CandidateSource answers a wildcard pop (GET /api/v1/pop/queue/:queue):
// it decides which partitions to try and runs the claim core over them.
// SQLScan asks PostgreSQL (its cost grows with the partition count); the
// hot-list (internal/hotlist) answers from memory and calls PopList with
// the partitions it believes hot, checking them back in by each Verdict,
// and Reseed for its periodic floor. The server holds one CandidateSource
// and tells it about everything that can create or remove pending work.
type CandidateSource interface {
	// Pop serves one wildcard pop.
	Pop(ctx context.Context, q Querier, p Pop) (PopResult, error)
	// Note tells the source about a change of pending work (a push, an ack,
	// a seek, a group deletion, a DLQ replay) or of a queue's options. It
	// must not block.
	Note(ev Event)
}

// Event kinds for CandidateSource.Note.
const (
	EventPushed       = "pushed"        // new events in Partitions
	EventAcked        = "acked"         // a lease released (Partitions)
	EventCommitted    = "committed"     // a transaction with pushes / acks committed
	EventSeeked       = "seeked"        // a group moved: pending work may appear without a push
	EventGroupDeleted = "group_deleted" // Group deleted on Queue ("" = all queues)
	EventDLQReplayed  = "dlq_replayed"  // a dead letter is back in its partition (Partitions)
	EventConfigured   = "configured"    // Queue's options changed (delayedProcessing, windowBuffer, ...)
)

// Event is one change of pending work. Queue is the stored queue name
// (tenant-scoped names included); "" with EventGroupDeleted means every
// queue of every tenant. EventGroupDeleted with Queue set and Group ""
// means the queue itself was deleted (its partition ids are gone).
type Event struct {
	Kind       string
	Queue      string
	Group      string  // "" = every group
	Partitions []int32 // dense partition ids; nil = unknown / all
	// Acks (EventAcked) says, per acknowledged partition, which group
	// acked and what the ack did to its lease.
	Acks []AckNote
}

// AckNote is one acknowledgment as a candidate source sees it.
type AckNote struct {
	Group       string // the real group name (QueueMode for queue mode)
	PartitionID int32
	// LeaseReleased: the ack closed the batch's lease.
	LeaseReleased bool
	// Redeliver: messages of the batch come back (status retry, or failed
	// without a move to the dead-letter queue).
	Redeliver bool
}

// SQLScan is the CandidateSource without the hot-list: every wildcard pop
// runs the SQL candidate scan (PopAny).
type SQLScan struct{}

// Pop runs PopAny.
func (SQLScan) Pop(ctx context.Context, q Querier, p Pop) (PopResult, error) {
	return PopAny(ctx, q, p)
}

// Note does nothing: the scan asks PostgreSQL every time.
func (SQLScan) Note(Event) {}

var _ CandidateSource = SQLScan{}
