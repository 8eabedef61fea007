package main

// The helper command of the lease guard tests: the test binary, run again
// as run's command, which writes heartbeats to a file and ignores
// SIGTERM; and the reads of that file.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The helper command of the guard tests: with KRABKA_COORD_HEARTBEAT set
// to a file, it appends "start NAME NS", then "beat NAME NS" every 10 ms,
// and it ignores SIGTERM, so only the lease guard's SIGKILL stops it.
const heartbeatEnv = "KRABKA_COORD_HEARTBEAT"

func TestHeartbeatHelper(t *testing.T) {
	file := os.Getenv(heartbeatEnv)
	if file == "" {
		t.Skip("the helper command of TestRunLeaseGuard")
	}
	signal.Ignore(syscall.SIGTERM)
	out, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		os.Exit(1)
	}
	name := os.Getenv(envMember)
	fmt.Fprintf(out, "start %s %d\n", name, time.Now().UnixNano())
	for {
		time.Sleep(10 * time.Millisecond) // the helper's beat: what it does, not a wait
		fmt.Fprintf(out, "beat %s %d\n", name, time.Now().UnixNano())
	}
}

// heartbeats reads the helper's file: the first start and the last beat
// of each member, in ns.
func heartbeats(t *testing.T, file string) (starts, lasts map[string]int64) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	starts, lasts = map[string]int64{}, map[string]int64{}
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) != 3 {
			continue
		}
		ns, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			continue
		}
		if fields[0] == "start" {
			if _, ok := starts[fields[1]]; !ok {
				starts[fields[1]] = ns
			}
		}
		lasts[fields[1]] = max(lasts[fields[1]], ns)
	}
	return starts, lasts
}

// waitFile waits until the file holds want.
func waitFile(t *testing.T, file, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		data, _ := os.ReadFile(file)
		if bytes.Contains(data, []byte(want)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not hold %q after %v:\n%s", file, want, timeout, data)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval of the condition wait
	}
}
