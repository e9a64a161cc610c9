package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinel errors. Errors returned by this package (and by MapError) match
// one of them with errors.Is, and still unwrap to the driver's error
// (*pgconn.PgError and friends) with errors.As.
var (
	// ErrAuth: the server rejected the credentials.
	ErrAuth = errors.New("authentication failed")
	// ErrUnreachable: no server answered at the address (refused, DNS,
	// timeout, server starting up or shutting down).
	ErrUnreachable = errors.New("database server unreachable")
	// ErrNoDatabase: the server has no database of that name.
	ErrNoDatabase = errors.New("database does not exist")
	// ErrPrivilege: the role lacks a privilege the operation needs.
	ErrPrivilege = errors.New("insufficient privilege")
	// ErrNotInstalled: the pgque engine is not installed in the database.
	ErrNotInstalled = errors.New("pgque engine not installed")
)

// Code returns the SQLSTATE of a server error ("" for other errors), to
// compare with the github.com/jackc/pgerrcode constants.
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// IsDataException says whether err is the server refusing a value (SQLSTATE
// class 22, data exception: out of range, invalid text representation,
// untranslatable character, ...): the request's fault.
func IsDataException(err error) bool { return strings.HasPrefix(Code(err), "22") }

// ServerMessage is a server error's message (err.Error() for others).
func ServerMessage(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message
	}
	return err.Error()
}

// IsConnLost says whether err is the database connection failing under a
// statement: the backend terminated (admin_shutdown, crash_shutdown), a
// connection exception (class 08), or the socket closed or reset. A
// write that failed so may have committed.
func IsConnLost(err error) bool {
	switch c := Code(err); {
	case c == pgerrcode.AdminShutdown, c == pgerrcode.CrashShutdown, c == pgerrcode.CannotConnectNow,
		strings.HasPrefix(c, "08"):
		return true
	case c != "":
		return false
	}
	var opErr *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) || errors.As(err, &opErr) ||
		errors.Is(err, pgconn.ErrConnClosed)
}

// IsPrivilege says whether err is the server refusing for lack of a
// privilege (insufficient_privilege).
func IsPrivilege(err error) bool { return Code(err) == pgerrcode.InsufficientPrivilege }

// IsUndefined says whether err names something that does not exist here:
// a schema, table, function or object such as a setting (the feature or
// extension is absent on this server or database).
func IsUndefined(err error) bool {
	switch Code(err) {
	case pgerrcode.InvalidSchemaName, pgerrcode.UndefinedTable, pgerrcode.UndefinedFunction, pgerrcode.UndefinedObject:
		return true
	}
	return false
}

// Error is a database error classified into one of the sentinel errors,
// with a hint telling the user what to do next.
type Error struct {
	// Kind is one of ErrAuth, ErrUnreachable, ErrNoDatabase, ErrPrivilege,
	// ErrNotInstalled.
	Kind error
	// What describes what failed, e.g. `connecting to localhost:5432 as "app"`.
	What string
	// Hint says what to do next.
	Hint string
	// Err is the underlying driver error.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Error())
	if e.What != "" {
		b.WriteString(" ")
		b.WriteString(e.What)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(driverMessage(e.Err))
	}
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Unwrap exposes both the sentinel and the driver error to errors.Is/As.
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// Describe renders a server error with its detail, hint and SQLSTATE (the
// driver's own Error() drops detail and hint); other errors as they are.
func Describe(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err.Error()
	}
	msg := pgErr.Message
	if pgErr.Detail != "" {
		msg += " (" + pgErr.Detail + ")"
	}
	msg += " [SQLSTATE " + pgErr.Code + "]"
	if pgErr.Hint != "" {
		msg += "; hint: " + pgErr.Hint
	}
	return msg
}

// Described wraps err so that its message is Describe(err) (detail and hint
// included); errors.Is/As still reach err.
func Described(err error) error {
	if err == nil {
		return nil
	}
	return describedError{err}
}

type describedError struct{ err error }

func (e describedError) Error() string { return Describe(e.err) }
func (e describedError) Unwrap() error { return e.err }

// driverMessage shortens the driver's error to the part a user reads: the
// server's message for a PgError, the innermost dial error otherwise.
func driverMessage(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return Describe(err)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		if inner := errors.Unwrap(connErr); inner != nil {
			// Several attempts (addresses, TLS then plain) are joined by
			// newlines and often repeat each other.
			var lines []string
			seen := map[string]bool{}
			for _, l := range strings.Split(inner.Error(), "\n") {
				if l = strings.TrimSpace(l); l != "" && !seen[l] {
					seen[l] = true
					lines = append(lines, l)
				}
			}
			return strings.Join(lines, "; ")
		}
	}
	return err.Error()
}

// MapError classifies err. It returns err unchanged when it is nil, already
// classified, or not one of the recognised cases, so callers can always write
// `return db.MapError(err)` at the database boundary.
func MapError(err error) error {
	if err == nil {
		return nil
	}
	var classified *Error
	if errors.As(err, &classified) {
		return err
	}
	if e := classifyPgError(err); e != nil {
		return e
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return &Error{Kind: ErrUnreachable, Err: err,
			Hint: "check the host name in --dsn / PGQUE_DSN / PGHOST"}
	}
	if isUnreachable(err) {
		return &Error{Kind: ErrUnreachable, Err: err,
			Hint: "check that PostgreSQL is running and that --dsn / PGQUE_DSN / PGHOST / PGPORT point to it"}
	}
	return err
}

func classifyPgError(err error) *Error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	mentionsEngine := strings.Contains(pgErr.Message, "pgque")
	switch pgErr.Code {
	case pgerrcode.InvalidPassword, pgerrcode.InvalidAuthorizationSpecification:
		return &Error{Kind: ErrAuth, Err: err,
			Hint: "check the user name and password (--dsn, PGQUE_DSN, PGUSER, PGPASSWORD or ~/.pgpass) and pg_hba.conf"}
	case pgerrcode.InvalidCatalogName:
		return &Error{Kind: ErrNoDatabase, Err: err,
			Hint: "create it (CREATE DATABASE ...; or createdb) or fix the database name in --dsn / PGDATABASE"}
	case pgerrcode.InsufficientPrivilege:
		return &Error{Kind: ErrPrivilege, Err: err,
			Hint: "connect as a role that has this privilege, or ask an administrator to grant it (README: \"Install on a managed database\")"}
	case pgerrcode.InvalidSchemaName:
		if mentionsEngine {
			return notInstalled(err)
		}
	case pgerrcode.UndefinedFunction, pgerrcode.UndefinedTable:
		if mentionsEngine {
			return notInstalled(err)
		}
	case pgerrcode.CannotConnectNow, pgerrcode.TooManyConnections, pgerrcode.AdminShutdown:
		return &Error{Kind: ErrUnreachable, Err: err,
			Hint: "the server is not accepting connections right now; retry in a moment"}
	}
	return nil
}

func notInstalled(err error) *Error {
	return &Error{Kind: ErrNotInstalled, Err: err,
		Hint: "run pgquectl install (with the same --dsn) to install the engine"}
}

func isUnreachable(err error) bool {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var connErr *pgconn.ConnectError
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &opErr):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true
	case errors.As(err, &connErr) && errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return false
}

// mapConnectError classifies an error from opening a connection and names
// the target, so the user sees which server and database failed.
func mapConnectError(err error, host string, port uint16, database, user string) error {
	target := fmt.Sprintf("(host %s port %d, database %q, user %q)", host, port, database, user)
	mapped := MapError(err)
	var e *Error
	if errors.As(mapped, &e) {
		if e.What == "" {
			e.What = target
		}
		return e
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) && errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: ErrUnreachable, What: target, Err: err,
			Hint: "the connection timed out; check the host and port, or raise --connect-timeout"}
	}
	return fmt.Errorf("connecting %s: %w", target, err)
}
