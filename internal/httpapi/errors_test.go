package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// The error map: PostgreSQL refusing a value (class 22) is the request's
// fault, a connection that died is the database's; 500 is left for bugs.
func TestStatusOfDatabaseErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("push: %w", &pgconn.PgError{Code: "22P05", Message: "unsupported Unicode escape sequence"}), http.StatusBadRequest},
		{fmt.Errorf("pop: %w", &pgconn.PgError{Code: "22003", Message: "integer out of range"}), http.StatusBadRequest},
		{fmt.Errorf("pop: %w", &pgconn.PgError{Code: "22021", Message: "invalid byte sequence"}), http.StatusBadRequest},
		{fmt.Errorf("push: %w", io.ErrUnexpectedEOF), http.StatusServiceUnavailable},
		{fmt.Errorf("push: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection"}), http.StatusServiceUnavailable},
		{fmt.Errorf("push: %w", &pgconn.PgError{Code: "08006", Message: "connection failure"}), http.StatusServiceUnavailable},
		{fmt.Errorf("push: %w", pgconn.ErrConnClosed), http.StatusServiceUnavailable},
		{fmt.Errorf("push: %w", context.DeadlineExceeded), http.StatusServiceUnavailable},
		{fmt.Errorf("push: %w", &pgconn.PgError{Code: "XX000", Message: "internal"}), http.StatusInternalServerError},
	} {
		if got, msg := statusOf(tc.err); got != tc.want {
			t.Errorf("%v: %d %q, want %d", tc.err, got, msg, tc.want)
		}
	}
	if got, _ := statusOf(maybeStored(fmt.Errorf("push: %w", io.ErrUnexpectedEOF))); got != http.StatusServiceUnavailable {
		t.Errorf("a push whose connection died: %d", got)
	}
}
