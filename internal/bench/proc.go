package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUTime returns the user plus system CPU time of this process, from
// getrusage(RUSAGE_SELF): every thread, the Go runtime's included.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RSSBytes returns the resident set size of this process, VmRSS of
// /proc/self/status.
func RSSBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) >= 1 {
				kb, _ := strconv.ParseInt(fields[0], 10, 64)
				return kb << 10
			}
		}
	}
	return -1
}

// HeapInuse returns the Go heap in use after a garbage collection. When
// the environment variable HeapProfileEnv names a directory, it also
// writes the process's heap profile there, as <mode>-<pid>.heap.pprof
// (read it with `go tool pprof -sample_index=inuse_space -top`): the
// breakdown behind a memory figure of a child.
func HeapInuse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if dir := os.Getenv(HeapProfileEnv); dir != "" {
		writeHeapProfile(dir, &m)
	}
	return int64(min(m.HeapInuse, math.MaxInt64))
}

// HeapProfileEnv names the directory where a child writes its heap
// profile, and its runtime.MemStats as JSON (<mode>-<pid>.memstats.json),
// at the moment HeapInuse measures it; unset, none is written.
const HeapProfileEnv = "KRABKA_BENCH_HEAP_PROFILE_DIR"

// childMode is the mode of this process when it runs as a child, for the
// name of its heap profile.
var childMode = "parent"

func writeHeapProfile(dir string, m *runtime.MemStats) {
	name := filepath.Join(dir, fmt.Sprintf("%s-%d", childMode, os.Getpid()))
	if stats, err := json.MarshalIndent(m, "", " "); err == nil {
		_ = os.WriteFile(name+".memstats.json", stats, 0o644)
	}
	f, err := os.Create(name + ".heap.pprof")
	if err != nil {
		fmt.Fprintf(os.Stderr, "heap profile: %v\n", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		fmt.Fprintf(os.Stderr, "heap profile: %v\n", err)
	}
}

// TCPConnections counts the established TCP sockets of this process whose
// remote port is port: the socket inodes under /proc/self/fd matched
// against /proc/self/net/tcp and tcp6, which list every socket of the
// network namespace.
func TCPConnections(port int) (int, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	inodes := make(map[string]bool)
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	count := 0
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		scanner := bufio.NewScanner(f)
		scanner.Scan() // header
		for scanner.Scan() {
			fields := strings.Fields(scanner.Text())
			if len(fields) < 10 {
				continue
			}
			remote, state, inode := fields[2], fields[3], fields[9]
			if state != "01" || !inodes[inode] { // 01: ESTABLISHED
				continue
			}
			i := strings.LastIndexByte(remote, ':')
			p, err := strconv.ParseInt(remote[i+1:], 16, 32)
			if err == nil && int(p) == port {
				count++
			}
		}
		f.Close()
	}
	return count, nil
}

// PortOf returns the port of a host:port address.
func PortOf(address string) int {
	i := strings.LastIndexByte(address, ':')
	p, err := strconv.Atoi(address[i+1:])
	if err != nil {
		panic(fmt.Sprintf("bench: address %q has no port", address))
	}
	return p
}
