// Package localpg creates, starts and stops throwaway local PostgreSQL
// clusters: the one `pgquectl dev` brings up and the shared cluster the
// integration tests run against (internal/pgtest).
//
// A cluster lives in one state directory:
//
//	<state>/localpg.json   what we chose (port, binaries, options)
//	<state>/data/          the data directory (initdb)
//	<state>/sock/          the Unix socket directory
//	<state>/postgresql.log the server log
//
// When the process runs as root, initdb and pg_ctl run as the postgres user
// (PostgreSQL refuses root) and the state directory is handed to it.
package localpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Errors callers may test with errors.Is.
var (
	// ErrPortInUse: the requested port is taken by another process.
	ErrPortInUse = errors.New("port in use")
	// ErrNotInitialized: the state directory holds no cluster yet.
	ErrNotInitialized = errors.New("cluster not initialized")
)

// Options say where a cluster lives and how it is configured.
type Options struct {
	// StateDir holds everything of the cluster. Required.
	StateDir string
	// Port to listen on. 0 keeps the port the cluster used last time, or
	// picks a free one; a port given here is fixed: if it is in use, Start
	// fails with ErrPortInUse.
	Port int
	// Fast turns fsync off: for test clusters only (a crash of the machine
	// may corrupt the cluster).
	Fast bool
	// Settings are extra postgresql.conf settings (name -> value, written
	// as given: quote strings yourself, e.g. "'on'").
	Settings map[string]string
	// Binaries to use; nil means FindBinaries (or those the cluster was
	// created with).
	Binaries *Binaries
	// Log receives progress messages; nil discards them.
	Log *slog.Logger
}

// Cluster is one local PostgreSQL cluster.
type Cluster struct {
	StateDir  string
	DataDir   string
	SocketDir string
	LogFile   string
	// Port the cluster listens on (localhost and the Unix socket).
	Port int
	// Fast tells whether durability is off.
	Fast bool
	// Bin are the server binaries in use.
	Bin Binaries
	// CronPreloaded tells whether pg_cron is in shared_preload_libraries
	// (it is whenever pg_cron.so is installed), with
	// cron.database_name = 'postgres'.
	CronPreloaded bool

	settings      map[string]string
	fixedPort     bool
	configChanged bool // pgquectl.conf rewritten with new content
	log           *slog.Logger
}

// state is what localpg.json records between runs.
type state struct {
	Port      int       `json:"port"`
	Fast      bool      `json:"fast"`
	BinDir    string    `json:"bin_dir"`
	Major     int       `json:"major"`
	SocketDir string    `json:"socket_dir"`
	CreatedAt time.Time `json:"created_at"`
}

const (
	stateFileName = "localpg.json"
	confFileName  = "pgquectl.conf"
	// Superuser is the cluster's bootstrap superuser (trust auth).
	Superuser = "postgres"
	// CronDatabase is where pg_cron keeps its jobs in a local cluster.
	CronDatabase = "postgres"
)

// Open describes the cluster in opts.StateDir without touching it. The
// cluster may not exist yet: Init creates it.
func Open(opts Options) (*Cluster, error) {
	if opts.StateDir == "" {
		return nil, errors.New("localpg: no state directory given")
	}
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("resolving the state directory: %w", err)
	}
	c := &Cluster{
		StateDir: stateDir,
		DataDir:  filepath.Join(stateDir, "data"),
		LogFile:  filepath.Join(stateDir, "postgresql.log"),
		Fast:     opts.Fast,
		settings: opts.Settings,
		log:      opts.Log,
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	st, err := c.readState()
	if err != nil {
		return nil, err
	}
	switch {
	case opts.Binaries != nil:
		c.Bin = *opts.Binaries
	case st != nil && st.BinDir != "":
		// Keep the binaries the data directory was created with.
		if c.Bin, err = BinariesIn(st.BinDir); err != nil {
			return nil, fmt.Errorf("the cluster in %s was created with %s, which is gone (%v): reinstall PostgreSQL %d or run `pgquectl dev destroy`", stateDir, st.BinDir, err, st.Major)
		}
	default:
		if c.Bin, err = FindBinaries(); err != nil {
			return nil, err
		}
	}
	c.CronPreloaded = c.Bin.HasPgCron()
	c.SocketDir = socketDirFor(stateDir)
	if st != nil {
		c.Port = st.Port
		c.Fast = st.Fast || opts.Fast
		if st.SocketDir != "" {
			c.SocketDir = st.SocketDir
		}
	}
	if opts.Port > 0 {
		c.Port = opts.Port
		c.fixedPort = true
	}
	return c, nil
}

// maxSocketPath is the longest Unix socket path the kernel accepts, less a
// little: sockaddr_un.sun_path is 108 bytes with the terminating NUL.
const maxSocketPath = 100

// socketDirFor is <state>/sock, unless the socket path would be too long for
// the kernel; then a short directory under the system temp dir.
func socketDirFor(stateDir string) string {
	dir := filepath.Join(stateDir, "sock")
	if len(dir)+len("/.s.PGSQL.65535") <= maxSocketPath {
		return dir
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("pgquectl-sock-%08x", fnv32(stateDir)))
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// Initialized tells whether the data directory holds a cluster.
func (c *Cluster) Initialized() bool {
	_, err := os.Stat(filepath.Join(c.DataDir, "PG_VERSION"))
	return err == nil
}

// DSN returns a connection URL for database db as the superuser over TCP.
func (c *Cluster) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     fmt.Sprintf("localhost:%d", c.Port),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Init creates the cluster if the state directory has none, and (re)writes
// the configuration pgquectl owns. It is a no-op on an existing cluster
// apart from refreshing that configuration.
func (c *Cluster) Init(ctx context.Context) error {
	if err := mkStateDir(c.StateDir); err != nil {
		return err
	}
	if err := c.handOver(ctx); err != nil {
		return err
	}
	if c.Initialized() {
		// An existing cluster: nothing is written here. Start writes the
		// configuration once it knows the port it can really use, so a
		// refused --port leaves the state files as they were.
		return c.checkMajor()
	}
	if entries, err := os.ReadDir(c.DataDir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists but holds no PostgreSQL cluster: remove it, or run `pgquectl dev destroy --state-dir %s`", c.DataDir, c.StateDir)
	}
	if c.Port == 0 {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.Port = port
	} else if c.fixedPort && !portFree(c.Port) {
		return c.portTaken()
	}
	args := []string{"-D", c.DataDir, "-A", "trust", "-U", Superuser, "--encoding", "UTF8", "--locale", "C"}
	if c.Fast {
		args = append(args, "--no-sync")
	}
	c.log.Info("creating PostgreSQL cluster", "data_dir", c.DataDir, "version", c.Bin.Version)
	if out, err := c.run(ctx, c.Bin.Path("initdb"), args...); err != nil {
		return fmt.Errorf("initdb failed: %w\n%s", err, tail(out, 20))
	}
	conf := filepath.Join(c.DataDir, "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", conf, err)
	}
	_, err = fmt.Fprintf(f, "\n# Settings owned by pgquectl (localpg): port, sockets, pg_cron, logging.\ninclude_if_exists = '%s'\n", confFileName)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", conf, err)
	}
	return c.writeConfig()
}

// portTaken is the error for a fixed port another process listens on.
func (c *Cluster) portTaken() error {
	return fmt.Errorf("%w: port %d on localhost is taken by another process: pass another --port, or stop that process", ErrPortInUse, c.Port)
}

// checkMajor refuses to run a data directory with another major version.
func (c *Cluster) checkMajor() error {
	raw, err := os.ReadFile(filepath.Join(c.DataDir, "PG_VERSION"))
	if err != nil {
		return fmt.Errorf("reading PG_VERSION: %w", err)
	}
	if v := strings.TrimSpace(string(raw)); v != fmt.Sprint(c.Bin.Major) {
		return fmt.Errorf("the cluster in %s is PostgreSQL %s but the binaries in %s are %d: install PostgreSQL %s or run `pgquectl dev destroy --state-dir %s`", c.DataDir, v, c.Bin.BinDir, c.Bin.Major, v, c.StateDir)
	}
	return nil
}

// writeConfig writes pgquectl.conf and localpg.json from the current fields.
func (c *Cluster) writeConfig() error {
	if err := os.MkdirAll(c.SocketDir, 0o755); err != nil {
		return fmt.Errorf("creating the socket directory: %w", err)
	}
	if err := chownToServer(c.SocketDir); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# Written by pgquectl (internal/localpg) on every start: edit postgresql.conf instead.\n")
	set := func(name, value string) { fmt.Fprintf(&b, "%s = %s\n", name, value) }
	set("listen_addresses", "'localhost'")
	set("port", fmt.Sprint(c.Port))
	set("unix_socket_directories", quoteConf(c.SocketDir))
	set("max_connections", "300")
	set("max_locks_per_transaction", "128")
	set("logging_collector", "off")
	set("log_line_prefix", "'%m [%p] %q%u@%d '")
	if c.CronPreloaded {
		set("shared_preload_libraries", "'pg_cron'")
		set("cron.database_name", quoteConf(CronDatabase))
		set("cron.host", quoteConf(c.SocketDir))
	}
	if c.Fast {
		// Only fsync: synchronous_commit=off would make pg_current_wal_lsn()
		// lag and full_page_writes=off would skew WAL measurements.
		set("fsync", "off")
	}
	names := make([]string, 0, len(c.settings))
	for name := range c.settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		set(name, c.settings[name])
	}
	path := filepath.Join(c.DataDir, confFileName)
	if old, err := os.ReadFile(path); err != nil || string(old) != b.String() {
		c.configChanged = true
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := chownToServer(path); err != nil {
		return err
	}
	return c.writeState()
}

func quoteConf(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (c *Cluster) readState() (*state, error) {
	raw, err := os.ReadFile(filepath.Join(c.StateDir, stateFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the cluster state: %w", err)
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("reading %s: %w (fix or delete the file)", filepath.Join(c.StateDir, stateFileName), err)
	}
	return &st, nil
}

func (c *Cluster) writeState() error {
	st, err := c.readState()
	if err != nil || st == nil {
		st = &state{CreatedAt: time.Now().UTC()}
	}
	st.Port, st.Fast, st.BinDir, st.Major, st.SocketDir = c.Port, c.Fast, c.Bin.BinDir, c.Bin.Major, c.SocketDir
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(c.StateDir, stateFileName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the cluster state: %w", err)
	}
	return os.Rename(tmp, path)
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
