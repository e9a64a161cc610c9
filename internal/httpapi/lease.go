package httpapi

import (
	"math"
	"net/http"

	"github.com/pgquectl/pgquectl/internal/broker"
)

type leaseExtendRequest struct {
	Seconds *int `json:"seconds"`
}

// leaseExtend extends the caller's live leases held by the path's lease id.
// Another tenant's lease is answered as an unknown one (success false,
// renewed 0): the SQL function filters by the caller's tenant.
func (s *Server) leaseExtend(w http.ResponseWriter, r *http.Request) error {
	var req leaseExtendRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	secs := 60
	if req.Seconds != nil {
		if *req.Seconds < 1 || *req.Seconds > math.MaxInt32 {
			return badRequest("seconds must be between 1 and 2147483647")
		}
		secs = *req.Seconds
	}
	id := r.PathValue("leaseId")
	ctx, cancel := dbCtx(r)
	defer cancel()
	n, until, err := broker.ExtendLeaseIn(ctx, s.pool, scopeOf(r), id, secs)
	if err != nil {
		return err
	}
	var exp any
	if n > 0 {
		exp = isoMillis(until)
	}
	writeJSON(w, http.StatusOK, map[string]any{"leaseId": id, "success": n > 0, "renewed": n,
		"newExpiresAt": exp, "expiresAt": exp, "lease_expires_at": exp})
	return nil
}
