package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgquectl/pgquectl/internal/broker"
)

// Maintenance switches (GET / POST /api/v1/system/maintenance[/pop]):
// stored in the database (pgque.broker_maintenance), so every broker of a
// database shares them. A broker keeps them in memory: it reads them at
// its first request, again when a change is announced on
// broker.MaintenanceChannel (peers on) and at most every
// maintenanceRefresh otherwise (in the background: a request never waits
// for that read). Push maintenance refuses pushes with 503 and
// Retry-After (nothing is buffered or stored); pop maintenance answers
// pops empty (204) and keeps long polls parked until it ends.

// maintenanceRefresh is how stale the in-memory switches may get before a
// request triggers a background re-read (the peer notification is
// immediate; this covers --no-peers and a lost notification).
const maintenanceRefresh = 2 * time.Second

// pushRetryAfter is the Retry-After (seconds) of a push refused under
// maintenance.
const pushRetryAfter = 5

type maintState struct {
	push, pop  atomic.Bool
	loaded     atomic.Bool
	readAt     atomic.Int64 // unix nanoseconds of the last read
	refreshing atomic.Bool
	again      atomic.Bool // a re-read was asked for during one
	refused    prometheus.Counter
}

func (s *Server) initMaintenance() {
	m := &s.maint
	m.refused = prometheus.NewCounter(prometheus.CounterOpts{Name: "pgque_maintenance_refused_pushes_total",
		Help: "Push, transaction and DLQ replay requests refused because push maintenance is on."})
	s.metrics.reg.MustRegister(m.refused)
	for mode, b := range map[string]*atomic.Bool{"push": &m.push, "pop": &m.pop} {
		s.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgque_maintenance_mode",
			Help: "Maintenance switches as this broker knows them (1 = on).", ConstLabels: prometheus.Labels{"mode": mode}},
			func() float64 {
				if b.Load() {
					return 1
				}
				return 0
			}))
	}
}

// store records switches read from (or written to) the database.
func (s *Server) storeMaintenance(st broker.Maintenance) {
	s.maint.push.Store(st.Push)
	s.maint.pop.Store(st.Pop)
	s.maint.readAt.Store(time.Now().UnixNano())
	s.maint.loaded.Store(true)
}

// readMaintenance reads the switches from the database and keeps them.
func (s *Server) readMaintenance(ctx context.Context) (broker.Maintenance, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	st, err := broker.ReadMaintenance(ctx, s.pool)
	if err != nil {
		return st, err
	}
	s.storeMaintenance(st)
	return st, nil
}

// refreshMaintenance re-reads the switches in the background: one read at
// a time; a call during a read (which may have started before the change
// it announces committed) gets one more read after it.
func (s *Server) refreshMaintenance() {
	s.maint.again.Store(true)
	if !s.maint.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			s.maint.again.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := s.readMaintenance(ctx); err != nil {
				s.log.Warn("reading the maintenance mode failed; keeping the last known state", "err", err)
			}
			cancel()
			s.maint.refreshing.Store(false)
			if !s.maint.again.Load() || !s.maint.refreshing.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// maintenance is the switches as this broker knows them. The first call
// reads them (a failure counts as off and is retried by the next call);
// later calls trigger a background re-read when they are stale.
func (s *Server) maintenance(ctx context.Context) broker.Maintenance {
	if !s.maint.loaded.Load() {
		if st, err := s.readMaintenance(ctx); err == nil {
			return st
		} else {
			s.log.Warn("reading the maintenance mode failed; serving as if it were off", "err", err)
		}
	} else if time.Since(time.Unix(0, s.maint.readAt.Load())) > maintenanceRefresh {
		s.refreshMaintenance()
	}
	return broker.Maintenance{Push: s.maint.push.Load(), Pop: s.maint.pop.Load()}
}

// refusePush answers 503 with Retry-After while push maintenance is on.
func (s *Server) refusePush(w http.ResponseWriter, r *http.Request) error {
	if !s.maintenance(r.Context()).Push {
		return nil
	}
	s.maint.refused.Inc()
	w.Header().Set("Retry-After", strconv.Itoa(pushRetryAfter))
	return &apiError{status: http.StatusServiceUnavailable,
		msg: "push maintenance mode is on: nothing was stored; retry after it is switched off (POST /api/v1/system/maintenance {\"enabled\":false})"}
}

// refusePushes is refusePush for a transaction: only one with pushes.
func (s *Server) refusePushes(w http.ResponseWriter, r *http.Request, pushes [][]broker.Item) error {
	for _, p := range pushes {
		if p != nil {
			return s.refusePush(w, r)
		}
	}
	return nil
}

type maintenanceBody struct {
	Enabled *bool `json:"enabled"`
}

// setMaintenance is the POST of both switches.
func (s *Server) setMaintenance(r *http.Request, mode string) (broker.Maintenance, error) {
	var body maintenanceBody
	if err := decodeBody(r, &body, true); err != nil {
		return broker.Maintenance{}, err
	}
	if body.Enabled == nil {
		return broker.Maintenance{}, badRequest("enabled (boolean) is required")
	}
	if tenantOf(r) != "" {
		return broker.Maintenance{}, &apiError{status: http.StatusForbidden,
			msg: "maintenance mode is shared by every tenant of the database: only the default tenant may change it"}
	}
	ctx, cancel := context.WithTimeout(r.Context(), dbTimeout)
	defer cancel()
	st, err := broker.SetMaintenance(ctx, s.pool, mode, *body.Enabled)
	if err != nil {
		return st, err
	}
	s.storeMaintenance(st)
	s.log.Info("maintenance mode changed", "mode", mode, "enabled", *body.Enabled)
	return st, nil
}

func (s *Server) getMaintenance(w http.ResponseWriter, r *http.Request) error {
	st, err := s.readMaintenance(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"maintenanceMode":    st.Push,
		"popMaintenanceMode": st.Pop,
		// Queen buffers pushes in a local file under maintenance; this
		// broker keeps no second store (pushes are refused), so nothing is
		// ever buffered.
		"bufferedMessages": 0,
		"bufferHealthy":    true,
		"bufferStats":      map[string]any{},
	})
	return nil
}

func (s *Server) postMaintenance(w http.ResponseWriter, r *http.Request) error {
	st, err := s.setMaintenance(r, "push")
	if err != nil {
		return err
	}
	msg := "Maintenance mode DISABLED. PUSHes are accepted again."
	if st.Push {
		msg = "Maintenance mode ENABLED. PUSHes are refused with 503 and Retry-After (nothing is buffered) until it is disabled."
	}
	writeJSON(w, http.StatusOK, map[string]any{"maintenanceMode": st.Push, "bufferedMessages": 0,
		"bufferHealthy": true, "message": msg})
	return nil
}

func popMaintenanceMessage(on, changed bool) string {
	switch {
	case on && changed:
		return "Pop maintenance mode ENABLED. All POP operations will return empty arrays."
	case changed:
		return "Pop maintenance mode DISABLED. Normal operation resumed."
	case on:
		return "Pop maintenance mode is ON. All POP operations return empty arrays."
	}
	return "Pop maintenance mode is OFF. Normal operation."
}

func (s *Server) getPopMaintenance(w http.ResponseWriter, r *http.Request) error {
	st, err := s.readMaintenance(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"popMaintenanceMode": st.Pop, "message": popMaintenanceMessage(st.Pop, false)})
	return nil
}

func (s *Server) postPopMaintenance(w http.ResponseWriter, r *http.Request) error {
	st, err := s.setMaintenance(r, "pop")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"popMaintenanceMode": st.Pop, "message": popMaintenanceMessage(st.Pop, true)})
	return nil
}
