// Package hotlistpg plugs the in-memory hot-list (internal/hotlist) into
// the broker: a broker.CandidateSource that checks candidates out of the
// hot-list, runs one pgque.pop_list call over them and checks them back in
// by verdict; the SQL reseeder (pgque.group_reseed); and the peer
// transport that carries dirty hints between brokers of one database over
// LISTEN / NOTIFY. See docs/design/hotlist.md.
package hotlistpg

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pgquectl/pgquectl/internal/broker"
	"github.com/pgquectl/pgquectl/internal/hotlist"
	"github.com/pgquectl/pgquectl/internal/queuekey"
)

// Names maps the broker's stored queue names (tenant-scoped names
// included) to hot-list keys (queuekey.Make: the wake-gate bytes)
// and back.
type Names struct {
	Key    func(stored string) string
	Stored func(key string) string
}

// Config configures a Source.
type Config struct {
	// DB runs the reseed scans (a pool: reseeds run in the background).
	DB broker.Querier
	// Names maps stored queue names and keys; nil functions mean the
	// identity of the default tenant (key = queuekey.Make("", name)).
	Names Names
	// Options are the hot-list's knobs; Reseeder is set here, Peers
	// is taken from Peers below.
	Options hotlist.Options
	// Peers, when set, carries dirty hints to the other brokers.
	Peers *Transport
}

// Source is the hot-list candidate source.
type Source struct {
	h     *hotlist.HotList
	names Names
	peers *Transport
	// replayRepeat: a dead-letter replay whose partition is not named
	// forgets the queue's rings again after this long (a safety net).
	replayRepeat time.Duration

	// Queue options (delayedProcessing, windowBuffer) by key, read from
	// the database when a cold ring of the queue is prepared and again by
	// a pop when they are older than optsTTL or a configure was noted.
	optsTTL time.Duration
	optsMu  sync.Mutex
	opts    map[string]time.Time // key -> when its options were read
}

// OptionsTTL is how long a queue's delayedProcessing / windowBuffer, read
// by the hot-list source, are trusted before a pop reads them again (a
// configure through this broker refreshes them at once; through another
// broker, within this time).
const OptionsTTL = 30 * time.Second

var _ broker.CandidateSource = (*Source)(nil)

// New builds a Source; Start runs the hot-list's background loops.
func New(cfg Config) *Source {
	s := &Source{names: cfg.Names, peers: cfg.Peers, replayRepeat: time.Second,
		optsTTL: OptionsTTL, opts: map[string]time.Time{}}
	if s.names.Key == nil {
		s.names.Key = func(stored string) string { return queuekey.Make("", stored) }
	}
	if s.names.Stored == nil {
		s.names.Stored = func(key string) string { _, q := queuekey.Split(key); return q }
	}
	o := cfg.Options
	o.ClaimsSeeMarks = true // pop_list: a range closes at the claim's own snapshot
	if cfg.DB != nil {
		o.Reseeder = reseeder{db: cfg.DB, names: s.names}
	}
	if cfg.Peers != nil {
		o.Peers = cfg.Peers
	}
	s.h = hotlist.New(o)
	if cfg.Peers != nil {
		cfg.Peers.setReceiver(s.h.ReceiveHints)
	}
	return s
}

// Peers is the peer transport (nil without peers).
func (s *Source) Peers() *Transport { return s.peers }

// HintPeersNow tells the other brokers at once, not through the coalesced
// sender, that partition id of the stored queue has work: for answers
// after which this broker may be gone (a dead letter replayed through a
// broker killed right after answering must still be found by the others'
// warm rings before their reseed floor). No-op without a peer transport.
func (s *Source) HintPeersNow(ctx context.Context, stored string, id int32) error {
	if s.peers == nil {
		return nil
	}
	return s.peers.SendHints(ctx, []hotlist.Hint{{Key: s.names.Key(stored), ID: id}})
}

// HotList is the underlying hot-list (stats, subscriptions, tests).
func (s *Source) HotList() *hotlist.HotList { return s.h }

// Start runs the hot-list's loops (wake tick, reseed floor, idle sweep,
// hint sender, summary log) and the peer hello, until ctx ends or Stop.
func (s *Source) Start(ctx context.Context) {
	s.h.Start(ctx)
	if s.peers != nil {
		s.peers.start(ctx)
	}
}

// Stop ends the background loops (at most until ctx ends).
func (s *Source) Stop(ctx context.Context) error {
	if s.peers != nil {
		s.peers.stop()
	}
	return s.h.Stop(ctx)
}

// Subscribe wakes a parked wildcard pop of stored queue when the hot-list
// learns of work (a mark, a promoted ack, a due revisit, a reseed).
func (s *Source) Subscribe(stored string) (<-chan struct{}, func()) {
	return s.h.Subscribe(s.names.Key(stored))
}

func groupOf(g string) string { return broker.GroupOrDefault(g) }

// Pop serves one wildcard pop: check out candidates, one pop_list call
// over them, check in by verdict. The deferred Release is the drop guard:
// a pop that fails or is cancelled before its check-in puts its
// candidates back. No candidate means nothing known pending: the pop is
// empty without a database call.
func (s *Source) Pop(ctx context.Context, q broker.Querier, p broker.Pop) (broker.PopResult, error) {
	key := s.names.Key(p.Queue)
	if err := s.refreshOptions(ctx, q, p.Queue, key); err != nil {
		return broker.PopResult{}, err
	}
	co, err := s.h.Checkout(ctx, hotlist.Request{Key: key, Group: groupOf(p.Group),
		Batch: p.Batch, Partitions: p.MaxPartitions, AutoAck: p.AutoAck,
		// A cold ring: pop_list over no partition subscribes the group (its
		// first contact, as the SQL scan would) before the reseed, so a new
		// group is not seeded with every partition that has old events.
		// The queue's options are read there too, the first time (after
		// pop_list succeeded: a pop on a queue that does not exist costs
		// one call, as without the hot-list).
		Prepare: func(ctx context.Context) error {
			if _, err := broker.PopList(ctx, q, p, []int32{}); err != nil {
				return err
			}
			s.optsMu.Lock()
			_, known := s.opts[key]
			s.optsMu.Unlock()
			if known {
				return nil
			}
			return s.loadOptions(ctx, q, p.Queue, key)
		}})
	if err != nil {
		return broker.PopResult{}, err
	}
	defer co.Release()
	cands := co.Candidates()
	ids := make([]int32, 0, len(cands))
	var byName []hotlist.Verdict
	for _, c := range cands {
		if c.ID == hotlist.NoID {
			// Known by name only (a peer that did not know the id): pop_list
			// takes ids. An empty verdict clears it after the grace period;
			// the reseed floor finds it if it has work.
			byName = append(byName, hotlist.Verdict{PartitionID: hotlist.NoID, Partition: c.Name, Kind: hotlist.VerdictEmpty})
			continue
		}
		ids = append(ids, c.ID)
	}
	if len(ids) == 0 {
		co.CheckIn(byName)
		return broker.PopResult{}, nil
	}
	res, err := broker.PopList(ctx, q, p, ids)
	if err != nil {
		return res, err
	}
	vs := make([]hotlist.Verdict, 0, len(res.Verdicts)+len(byName))
	for _, v := range res.Verdicts {
		vs = append(vs, hotlist.Verdict{PartitionID: v.PartitionID, PartitionUUID: v.PartitionUUID,
			Partition: v.Partition, Kind: v.Kind, Drained: v.Drained, Until: v.Until})
	}
	co.CheckIn(append(vs, byName...))
	return res, nil
}

// refreshOptions reads the queue's options again when they were read
// more than optsTTL ago or a configure was noted since; a queue whose
// options were never read gets them from its cold ring's Prepare.
func (s *Source) refreshOptions(ctx context.Context, q broker.Querier, stored, key string) error {
	s.optsMu.Lock()
	at, ok := s.opts[key]
	s.optsMu.Unlock()
	if !ok || time.Since(at) < s.optsTTL {
		return nil
	}
	return s.loadOptions(ctx, q, stored, key)
}

// loadOptions hands the queue's delayedProcessing and windowBuffer to the
// hot-list (its marks park entries by them: a delayed queue's new work is
// looked at after D + LeasedSlack, a window queue's after W or
// WindowMarks marks): one pgque.broker_queues call.
func (s *Source) loadOptions(ctx context.Context, q broker.Querier, stored, key string) error {
	now := time.Now()
	qs, err := broker.Queues(ctx, q, stored)
	if err != nil {
		return fmt.Errorf("hot-list: reading the options of queue %q: %w", stored, err)
	}
	var qo hotlist.QueueOptions
	if len(qs) == 1 {
		qo = hotlist.QueueOptions{Delay: seconds(qs[0].Options["delayedProcessing"]), Window: seconds(qs[0].Options["windowBuffer"])}
	}
	s.h.SetQueueOptions(key, qo)
	s.optsMu.Lock()
	if len(s.opts) >= 100000 {
		// A bound for throw-away queue names: forget the stale entries
		// (a queue forgotten while its ring lives keeps the options it
		// has until its ring is swept and seeded again).
		for k, t := range s.opts {
			if now.Sub(t) >= s.optsTTL {
				delete(s.opts, k)
			}
		}
	}
	s.opts[key] = now
	s.optsMu.Unlock()
	return nil
}

// seconds reads a whole number of seconds from a decoded JSON option.
func seconds(v any) time.Duration {
	if f, ok := v.(float64); ok && f > 0 {
		return time.Duration(f * float64(time.Second))
	}
	return 0
}

// Note applies a change of pending work (called after it committed).
func (s *Source) Note(ev broker.Event) {
	h := s.h
	switch ev.Kind {
	case broker.EventPushed, broker.EventCommitted:
		key := s.names.Key(ev.Queue)
		// A push's waiters are woken by the broker's gate (it opens the
		// queue's gate right after this note, and its long-polls park on
		// it): the hot-list's quiet wake would wake them again.
		src := hotlist.SourcePushWoken
		if ev.Kind == broker.EventCommitted {
			src = hotlist.SourceCommit
		}
		for _, id := range ev.Partitions {
			h.Mark(key, hotlist.PartRef{ID: id}, src)
		}
		if len(ev.Partitions) == 0 && src == hotlist.SourceCommit {
			h.WakeNow(key)
		}
	case broker.EventAcked:
		key := s.names.Key(ev.Queue)
		for _, a := range ev.Acks {
			h.Acked(key, groupOf(a.Group), hotlist.PartRef{ID: a.PartitionID},
				hotlist.AckOutcome{LeaseReleased: a.LeaseReleased, Redeliver: a.Redeliver})
		}
	case broker.EventSeeked:
		h.Seeked(s.names.Key(ev.Queue), groupOf(ev.Group))
	case broker.EventGroupDeleted:
		switch {
		case ev.Queue == "":
			h.GroupDeletedEverywhere(groupOf(ev.Group))
		case ev.Group == "":
			h.QueueDeleted(s.names.Key(ev.Queue))
		default:
			h.QueueGroupDeleted(s.names.Key(ev.Queue), ev.Group)
		}
	case broker.EventConfigured:
		// The queue's options may have changed: its next pop reads them.
		s.optsMu.Lock()
		if _, ok := s.opts[s.names.Key(ev.Queue)]; ok {
			s.opts[s.names.Key(ev.Queue)] = time.Time{}
		}
		s.optsMu.Unlock()
	case broker.EventDLQReplayed:
		key := s.names.Key(ev.Queue)
		if len(ev.Partitions) > 0 {
			for _, id := range ev.Partitions {
				h.Mark(key, hotlist.PartRef{ID: id}, hotlist.SourceDLQ)
			}
			return
		}
		// The partition is not named: every group of the queue reseeds at
		// its next pop. The replayed event is claimable once the replay
		// committed (before this note); the rings are forgotten once more a
		// little later all the same, a safety net from when it became
		// visible only at the next tick (the reseed floor bounds the rest).
		h.Invalidate(key)
		h.WakeNow(key)
		time.AfterFunc(s.replayRepeat, func() { h.Invalidate(key); h.WakeNow(key) })
	}
}

// reseeder is hotlist.Reseeder over pgque.group_reseed.
type reseeder struct {
	db    broker.Querier
	names Names
}

func (r reseeder) ReseedPage(ctx context.Context, key, group string, afterID int32, limit int) ([]hotlist.ReseedRow, error) {
	cands, err := broker.Reseed(ctx, r.db, r.names.Stored(key), group, afterID, limit)
	if err != nil {
		return nil, err
	}
	rows := make([]hotlist.ReseedRow, len(cands))
	for i, c := range cands {
		rows[i] = hotlist.ReseedRow{ID: c.PartitionID, UUID: c.PartitionUUID, Name: c.Partition, LeasedUntil: c.LeaseUntil}
	}
	return rows, nil
}
