package status

import (
	"fmt"
	"strings"
)

// Level is the verdict of one check, ordered as the monitoring-plugin
// convention numbers them: OK 0, WARN 1, CRIT 2, UNKNOWN 3.
type Level int

// Levels.
const (
	OK Level = iota
	Warn
	Crit
	// Unknown: the check could not be evaluated (a section the role cannot
	// read, or the database cannot be reached).
	Unknown
)

// String returns "OK", "WARN", "CRIT" or "UNKNOWN".
func (l Level) String() string {
	switch l {
	case OK:
		return "OK"
	case Warn:
		return "WARN"
	case Crit:
		return "CRIT"
	case Unknown:
		return "UNKNOWN"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// ExitCode is the monitoring-plugin exit code for l.
func (l Level) ExitCode() int { return int(l) }

// MarshalText renders l by name in JSON.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses a level name.
func (l *Level) UnmarshalText(b []byte) error {
	switch strings.ToUpper(string(b)) {
	case "OK":
		*l = OK
	case "WARN":
		*l = Warn
	case "CRIT":
		*l = Crit
	case "UNKNOWN":
		*l = Unknown
	default:
		return fmt.Errorf("unknown level %q", b)
	}
	return nil
}

// rank orders levels by severity for the overall verdict: CRIT > WARN >
// UNKNOWN > OK. Something known to be broken outranks something unseen.
func (l Level) rank() int {
	switch l {
	case Crit:
		return 3
	case Warn:
		return 2
	case Unknown:
		return 1
	}
	return 0
}

// Worst returns the more severe of a and b.
func Worst(a, b Level) Level {
	if b.rank() > a.rank() {
		return b
	}
	return a
}

// Verdict is the level of one check row and why.
type Verdict struct {
	Level  Level  `json:"level"`
	Reason string `json:"reason"`
}

func ok(format string, a ...any) Verdict      { return Verdict{OK, fmt.Sprintf(format, a...)} }
func warn(format string, a ...any) Verdict    { return Verdict{Warn, fmt.Sprintf(format, a...)} }
func crit(format string, a ...any) Verdict    { return Verdict{Crit, fmt.Sprintf(format, a...)} }
func unknown(format string, a ...any) Verdict { return Verdict{Unknown, fmt.Sprintf(format, a...)} }

// worse keeps the more severe verdict (the first on a tie).
func worse(a, b Verdict) Verdict {
	if b.Level.rank() > a.Level.rank() {
		return b
	}
	return a
}
