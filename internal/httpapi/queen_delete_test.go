package httpapi_test

import (
	"net/url"
	"testing"

	"github.com/pgquectl/pgquectl/internal/httpapi"
)

// Deleting a queue is idempotent, as Queen has it: an unknown queue is 200
// with "deleted": false (Queen's clients delete before they create, and
// their HTTP clients throw on a 404), a deleted one "deleted": true. Both
// carry "existed".
func TestQueenDeleteQueueIdempotent(t *testing.T) {
	e := setup(t)
	b := e.start(httpapi.Config{})
	var got struct {
		Deleted *bool   `json:"deleted"`
		Existed *bool   `json:"existed"`
		Queue   string  `json:"queue"`
		Message *string `json:"message"`
	}
	b.must(200, "DELETE", "/api/v1/resources/queues/"+url.PathEscape("never made"), nil, &got)
	if got.Deleted == nil || *got.Deleted || got.Existed == nil || *got.Existed || got.Queue != "never made" || got.Message == nil {
		t.Fatalf("unknown queue: %+v", got)
	}
	b.push(item("q", "p", 1, ""))
	got.Deleted, got.Existed, got.Message = nil, nil, nil
	b.must(200, "DELETE", "/api/v1/resources/queues/q", nil, &got)
	if got.Deleted == nil || !*got.Deleted || got.Existed == nil || !*got.Existed || got.Queue != "q" {
		t.Fatalf("existing queue: %+v", got)
	}
	got.Deleted, got.Existed = nil, nil
	b.must(200, "DELETE", "/api/v1/resources/queues/q", nil, &got)
	if got.Deleted == nil || *got.Deleted || got.Existed == nil || *got.Existed {
		t.Fatalf("second delete: %+v", got)
	}
}
