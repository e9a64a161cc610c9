package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// serverUser is the OS user that runs PostgreSQL when we are root.
const serverUser = "postgres"

// asRoot tells whether the server programs must be run as serverUser.
func asRoot() bool { return os.Geteuid() == 0 }

// run executes a server program (as the postgres user when we are root) and
// returns its combined output.
func (c *Cluster) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	name, full := prog, args
	if asRoot() {
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			return nil, fmt.Errorf("running as root needs runuser (util-linux) to start PostgreSQL as %q: %w", serverUser, err)
		}
		name = runuser
		full = append([]string{"-u", serverUser, "--", prog}, args...)
	}
	cmd := exec.CommandContext(ctx, name, full...)
	cmd.Dir = "/"
	// The server must not pick up a client's PG* settings.
	cmd.Env = []string{"LC_ALL=C"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_ALL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// serverIDs returns the uid/gid of the postgres user.
func serverIDs() (int, int, error) {
	u, err := user.Lookup(serverUser)
	if err != nil {
		return 0, 0, fmt.Errorf("running as root, PostgreSQL must run as the %q user, which does not exist: %w (install the postgresql package, or run as a regular user)", serverUser, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return 0, 0, fmt.Errorf("user %q: uid %q: %w", serverUser, u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return 0, 0, fmt.Errorf("user %q: gid %q: %w", serverUser, u.Gid, err)
	}
	return uid, gid, nil
}

// chownToServer gives path to the postgres user when we are root.
func chownToServer(path string) error {
	if !asRoot() {
		return nil
	}
	uid, gid, err := serverIDs()
	if err != nil {
		return err
	}
	if err := os.Lchown(path, uid, gid); err != nil {
		return fmt.Errorf("handing %s to the %s user: %w", path, serverUser, err)
	}
	return nil
}

// handOver makes the state directory the postgres user's when we are root,
// and checks that user can reach it (every parent must be searchable).
func (c *Cluster) handOver(ctx context.Context) error {
	if !asRoot() {
		return nil
	}
	uid, gid, err := serverIDs()
	if err != nil {
		return err
	}
	err = filepath.WalkDir(c.StateDir, func(path string, d os.DirEntry, err error) error {
		// A running server creates and removes files meanwhile (a database
		// dropped by a concurrent test): a file that is gone needs no owner.
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := os.Lchown(path, uid, gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("handing %s to the %s user: %w", c.StateDir, serverUser, err)
	}
	if _, err := c.run(ctx, "/usr/bin/test", "-w", c.StateDir, "-a", "-x", c.StateDir); err != nil {
		blocked := "a parent directory"
		for dir := filepath.Dir(c.StateDir); ; dir = filepath.Dir(dir) {
			if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o001 == 0 {
				blocked = fmt.Sprintf("%s (mode %o)", dir, fi.Mode().Perm())
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
		return fmt.Errorf("the %s user cannot reach %s: %s is not searchable by it; chmod o+x it, or choose another --state-dir", serverUser, c.StateDir, blocked)
	}
	return nil
}

// mkStateDir creates the state directory (0700) and any missing parents
// (0755, so the postgres user can reach the state directory).
func mkStateDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	return nil
}

// freePort asks the kernel for a free TCP port on localhost.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree tells whether nothing listens on port at localhost.
func portFree(port int) bool {
	for _, addr := range []string{"127.0.0.1", "[::1]"} {
		l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", addr, port))
		if err != nil {
			var opErr *net.OpError
			// ::1 may simply not exist in a container: that is not "in use".
			if addr == "[::1]" && errors.As(err, &opErr) && !isAddrInUse(err) {
				continue
			}
			return false
		}
		l.Close()
	}
	return true
}

func isAddrInUse(err error) bool {
	return bytes.Contains([]byte(err.Error()), []byte("address already in use"))
}
