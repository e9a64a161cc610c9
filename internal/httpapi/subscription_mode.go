package httpapi

import (
	"fmt"
	"strings"
)

// Subscription modes as Queen has them: where a consumer group starts on
// a queue at its first contact. Only "new" (and its spellings "new-only",
// "new_only", "newonly", any case) starts at the tail; any other value,
// "from_beginning" and unknown words included, means "all": from the
// oldest retained message. Replaying too much is recoverable, skipping
// messages is not, so an unknown word is no error. A request naming no
// mode gets the server's DefaultSubscriptionMode ("" = all).

// modeOf maps a Queen subscriptionMode value to the engine's mode: "new"
// or "all".
func modeOf(raw string) string {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "new", "new-only", "new_only", "newonly":
		return "new"
	}
	return "all"
}

// defaultMode checks the server-wide default (Config.DefaultSubscriptionMode)
// and returns the engine's mode. Unlike a request's value, a misspelt
// default is an error: it applies to every group, so it is refused at
// startup rather than read as "all".
func defaultMode(raw string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "", "all", "from_beginning":
		return "all", nil
	case "new", "new-only", "new_only", "newonly":
		return "new", nil
	}
	return "", fmt.Errorf("default subscription mode %q: use all (or empty: from the oldest retained message) or new / new-only (from the latest message on)", raw)
}

// CheckDefaultSubscriptionMode reports whether mode is a valid
// Config.DefaultSubscriptionMode (New refuses it otherwise), so a command
// can reject a bad flag before it connects.
func CheckDefaultSubscriptionMode(mode string) error {
	_, err := defaultMode(mode)
	return err
}

// requestMode is the engine's mode for a request's subscriptionMode value
// ("" = the server's default).
func (s *Server) requestMode(raw string) string {
	if raw == "" {
		return s.defMode
	}
	return modeOf(raw)
}
