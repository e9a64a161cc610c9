package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Where a cell's CPU went, by process group: the bench cluster's
// PostgreSQL (the postmaster, its live children, and the children it has
// reaped during the cell - their time moves to its cutime/cstime), the
// brokers (pgquectl serve), the ticker daemon, the client (a latency
// cell's load client process, else this harness), and the whole
// machine (/proc/stat: busy and total time over all CPUs; steal counts as
// busy, the host took it). With the latency targets missed by CPU
// saturation on a 2-core machine, this is the number that says how far:
// CPU ms per message, per process group.

// userHZ is the kernel's clock tick for /proc times (USER_HZ, 100 on
// Linux everywhere in practice).
const userHZ = 100

// cpuSnap is one reading: seconds of CPU per group, and the machine's.
type cpuSnap struct {
	groups       map[string]float64
	machineBusy  float64
	machineTotal float64
	ok           bool
}

// CPUUse is a cell's CPU by group (seconds) and the machine's busy share.
type CPUUse struct {
	Seconds map[string]float64 `json:"seconds"`
	// MachineBusy: busy time over all CPUs ÷ total time over all CPUs.
	MachineBusy float64 `json:"machine_busy"`
}

// procTimes reads utime+stime (and with children, cutime+cstime) of a
// process in seconds, and its parent pid.
func procTimes(pid int, children bool) (sec float64, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The command is in parentheses and may hold spaces: fields start after ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] = state (field 3), f[1] = ppid (4), f[11] = utime (14), f[12] = stime (15), f[13] = cutime, f[14] = cstime.
	if len(f) < 15 {
		return 0, 0, false
	}
	num := func(k int) float64 { v, _ := strconv.ParseFloat(f[k], 64); return v }
	ppid, _ = strconv.Atoi(f[1])
	t := num(11) + num(12)
	if children {
		t += num(13) + num(14)
	}
	return t / userHZ, ppid, true
}

// postmasterPid reads the first line of <data>/postmaster.pid.
func postmasterPid(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// machineTimes reads /proc/stat's first line: busy and total seconds over
// all CPUs (idle and iowait are not busy).
func machineTimes() (busy, total float64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for k := 1; k < len(f) && k <= 8; k++ { // user nice system idle iowait irq softirq steal
		v, _ := strconv.ParseFloat(f[k], 64)
		total += v
		if k != 4 && k != 5 {
			busy += v
		}
	}
	return busy / userHZ, total / userHZ, true
}

// readCPU takes a reading for the cluster in dataDir and the given broker,
// ticker and client pids.
func readCPU(dataDir string, brokers []int, ticker, client int) cpuSnap {
	s := cpuSnap{groups: map[string]float64{}}
	busy, total, ok := machineTimes()
	if !ok {
		return s
	}
	s.machineBusy, s.machineTotal, s.ok = busy, total, true
	if pm := postmasterPid(dataDir); pm > 0 {
		if t, _, ok := procTimes(pm, true); ok {
			s.groups["postgres"] += t
		}
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == pm {
				continue
			}
			if t, ppid, ok := procTimes(pid, false); ok && ppid == pm {
				s.groups["postgres"] += t
			}
		}
	}
	for _, pid := range brokers {
		if t, _, ok := procTimes(pid, true); ok {
			s.groups["brokers"] += t
		}
	}
	if ticker > 0 {
		if t, _, ok := procTimes(ticker, true); ok {
			s.groups["ticker"] += t
		}
	}
	if t, _, ok := procTimes(client, false); ok {
		s.groups["client"] += t
	}
	if client != os.Getpid() {
		// This harness, when the client is another process: recorded, not
		// part of the system measured (cpuCols leaves it out of "all").
		if t, _, ok := procTimes(os.Getpid(), false); ok {
			s.groups["harness"] += t
		}
	}
	return s
}

// cpuBetween is the CPU used from a to b; nil when either reading failed.
func cpuBetween(a, b cpuSnap) *CPUUse {
	if !a.ok || !b.ok || b.machineTotal <= a.machineTotal {
		return nil
	}
	u := &CPUUse{Seconds: map[string]float64{}, MachineBusy: round3((b.machineBusy - a.machineBusy) / (b.machineTotal - a.machineTotal))}
	for g, v := range b.groups {
		u.Seconds[g] = round3(max(0, v-a.groups[g]))
	}
	return u
}

// cpuCols renders a cell's CPU per message as table columns: all,
// PostgreSQL, serve, the ticker daemon, the client (ms per message pushed),
// the machine's busy share and the harness when the client was a process
// of its own (not in all); "" when not measured.
func cpuCols(c *Cell) string {
	if c.CPU == nil || c.Pushed == 0 {
		return ""
	}
	per := func(g string) float64 { return 1000 * c.CPU.Seconds[g] / float64(c.Pushed) }
	all := 0.0
	for g, v := range c.CPU.Seconds {
		if g != "harness" {
			all += v
		}
	}
	harness := "—"
	if _, ok := c.CPU.Seconds["harness"]; ok {
		harness = fmt.Sprintf("%.3f", per("harness"))
	}
	return fmt.Sprintf("%.3f | %.3f | %.3f | %.3f | %.3f | %.0f%% | %s",
		1000*all/float64(c.Pushed), per("postgres"), per("brokers"), per("ticker"), per("client"), 100*c.CPU.MachineBusy, harness)
}
