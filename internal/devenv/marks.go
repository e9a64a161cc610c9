package devenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// marksFileName records, in the state directory, what dev has set up once
// and must not redo on a later run.
const marksFileName = "devenv.json"

// marks is the content of devenv.json.
type marks struct {
	// TickingSetUp lists the databases whose pg_cron ticking dev registered
	// (or found registered): a later dev leaves their ticking alone, even
	// after `pgquectl tick --off`.
	TickingSetUp map[string]bool `json:"ticking_set_up"`
}

func readMarks(stateDir string) (marks, error) {
	m := marks{TickingSetUp: map[string]bool{}}
	path := filepath.Join(stateDir, marksFileName)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("reading %s: %w (fix or delete the file)", path, err)
	}
	if m.TickingSetUp == nil {
		m.TickingSetUp = map[string]bool{}
	}
	return m, nil
}

// markTicking records that database's ticking as set up.
func (m marks) markTicking(stateDir, database string) error {
	if m.TickingSetUp[database] {
		return nil
	}
	m.TickingSetUp[database] = true
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(stateDir, marksFileName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
