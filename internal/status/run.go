package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Output formats.
const (
	FormatTable = "table" // the columns that fit 120 characters
	FormatWide  = "wide"  // the tables with every column
	FormatJSON  = "json"
)

// RunOptions are what `pgquectl status` passes in.
type RunOptions struct {
	Options
	// Format is FormatTable, FormatWide or FormatJSON.
	Format string
	// Check prints the one-line summary (unless Format is JSON) and is
	// what makes the caller turn the level into the exit code.
	Check bool
	// Watch re-collects and re-renders every Watch until ctx ends (0: once).
	Watch time.Duration
}

// Validate checks the options a user typed.
func (o RunOptions) Validate() error {
	if o.Format != FormatTable && o.Format != FormatWide && o.Format != FormatJSON {
		return fmt.Errorf("output format %q: use table, wide or json", o.Format)
	}
	if o.Sample < 0 {
		return errors.New("sample must not be negative")
	}
	if o.Watch < 0 || (o.Watch > 0 && o.Watch < 100*time.Millisecond) {
		return errors.New("watch interval: use at least 100ms (or 0 for once)")
	}
	if o.Watch > 0 && o.Check {
		return errors.New("--check runs once for a monitor; drop --watch")
	}
	return o.Thresholds.Validate()
}

// clearScreen moves the cursor home and clears the terminal between
// --watch refreshes of the table output.
const clearScreen = "\033[H\033[2J"

// Run collects (once, or every Watch until ctx ends), renders to w and
// returns the level of the last report. The error is non-nil when the
// database could not be reached (then the level is Unknown, and with Check
// the summary has already been written) or the output could not be written.
func Run(ctx context.Context, o RunOptions, w io.Writer) (Level, error) {
	c := NewCollector(o.Options)
	o.Options = c.opts // defaults filled in
	defer c.Close(context.WithoutCancel(ctx))
	if o.Watch <= 0 {
		r, err := c.Collect(ctx)
		if errors.Is(err, ErrInterrupted) {
			return Unknown, err // nothing to report: the user stopped it
		}
		if werr := render(r, o, w, false); werr != nil {
			return Unknown, werr
		}
		return r.Level, err
	}
	level := Unknown
	for {
		r, err := c.Collect(ctx)
		if ctx.Err() != nil {
			return level, nil // SIGINT during a collection: stop quietly
		}
		level = r.Level
		if werr := render(r, o, w, true); werr != nil {
			return level, werr
		}
		if err != nil {
			o.Log.Warn("status: collection failed; retrying at the next refresh", "err", err)
		}
		t := time.NewTimer(o.Watch)
		select {
		case <-ctx.Done():
			t.Stop()
			return level, nil
		case <-t.C:
		}
	}
}

// isTerminal says whether w is a terminal: --watch clears the screen only
// there, never in a file or a pipe.
func isTerminal(w io.Writer) bool {
	f, isFile := w.(*os.File)
	if !isFile {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func render(r *Report, o RunOptions, w io.Writer, watching bool) error {
	switch {
	case o.Format == FormatJSON:
		return r.WriteJSON(w)
	case o.Check:
		return r.WriteSummary(w)
	}
	if watching && isTerminal(w) {
		if _, err := io.WriteString(w, clearScreen); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	if o.Format == FormatWide {
		return r.WriteWide(w)
	}
	return r.WriteTable(w)
}
