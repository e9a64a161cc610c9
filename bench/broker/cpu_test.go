package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReadCPUCountsAClusterAndItsReapedChildren: the "postgres" group is
// the postmaster (named by <data>/postmaster.pid) plus its children, live
// or reaped during the cell - here this test process stands in for the
// postmaster and a shell child burns CPU, then exits and is reaped.
func TestReadCPUCountsAClusterAndItsReapedChildren(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(strconv.Itoa(os.Getpid())+"\n/data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := readCPU(dir, nil, 0, os.Getpid())
	if !a.ok {
		t.Skip("no /proc/stat here")
	}
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("burning CPU in a child: %v %s", err, out)
	}
	b := readCPU(dir, nil, 0, os.Getpid())
	u := cpuBetween(a, b)
	if u == nil {
		t.Fatal("cpuBetween: nil")
	}
	// The child's time reaches the group through this process's cutime.
	child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if got := u.Seconds["postgres"]; got < 0.5*child.Seconds() || got < 0.05 {
		t.Errorf("postgres group grew %.3f s, the reaped child used %.3f s", got, child.Seconds())
	}
	if u.MachineBusy <= 0 || u.MachineBusy > 1 {
		t.Errorf("machine busy %.3f, want in (0, 1]", u.MachineBusy)
	}
	c := &Cell{Pushed: 1000, CPU: u}
	if got := cpuCols(c); strings.Count(got, " | ") != 6 || !strings.HasSuffix(got, "| —") {
		t.Errorf("cpuCols: %q", got)
	}
	if cpuCols(&Cell{Pushed: 5}) != "" {
		t.Error("a cell without CPU readings rendered a CPU line")
	}
	if cpuBetween(cpuSnap{}, b) != nil {
		t.Error("cpuBetween with a failed reading is not nil")
	}
}
