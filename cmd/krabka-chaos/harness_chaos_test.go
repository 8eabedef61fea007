package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/chaos"
)

// The harness of the chaos tests: it builds krabka-chaos, runs it in a
// process group of its own, and reads its report.

// runChaos builds krabka-chaos, runs it with args (and --out, --json), and
// returns its report, after it failed the test on every violation and
// every lost command, and on a harness error (a cluster fault that failed
// included). The orchestrator runs in a process group of its own, with its
// members; the cleanup kills the whole group, so no member outlives the
// test.
func runChaos(t *testing.T, args []string, timeout time.Duration) *chaos.Report {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "krabka-chaos")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The run directory outlives a failed test, for inspection, and every test
	// with KRABKA_CHAOS_KEEP=1.
	dir, err := os.MkdirTemp("", "krabka-chaos-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("KRABKA_CHAOS_KEEP") == "1" {
			t.Logf("run directory kept for inspection: %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	args = append(args, "--out", dir, "--json")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		// The orchestrator and every member share the group; a leftover is
		// killed here, and its absence is checked.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still has a process after the run: %v", pgid, err)
		}
	})
	t.Logf("running %s", strings.Join(args, " "))
	err = cmd.Wait()
	if table, readErr := os.ReadFile(filepath.Join(dir, "summary.txt")); readErr == nil {
		t.Logf("summary:\n%s", table)
	}
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == exitFailed) {
		t.Fatalf("krabka-chaos run: %v\nstderr:\n%s", err, stderr.String())
	}
	var summary chaos.Summary
	if err := json.Unmarshal(stdout.Bytes(), &summary); err != nil {
		t.Fatalf("summary JSON: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	r := summary.Report
	if r == nil {
		t.Fatalf("summary without a report: %s", stdout.String())
	}
	for _, v := range r.Violations {
		t.Errorf("violation %s in role %s at offset %d: %s", v.Kind, v.Role, v.Offset, v.Detail)
	}
	for _, lost := range r.Lost {
		t.Errorf("lost acknowledged command %s", lost)
	}
	if r.Acknowledged == 0 {
		t.Error("no command was acknowledged")
	}
	// The independent checker: the history of every call linearizes
	// against the model of a fenced command log (Porcupine). A search that
	// ran out of time is no verdict, and fails too.
	if l := r.Linearizability; l.Result != chaos.LinearOK {
		t.Errorf("linearizability check: %s over %d operations: %v", l.Result, l.Ops, l.Detail)
	} else {
		t.Logf("linearizability check: ok over %d operations (%d writes of unknown outcome) in %s",
			l.Ops, l.Unknown, time.Duration(l.Millis)*time.Millisecond)
	}
	faults, err := chaos.ReadFaults(filepath.Join(dir, "nemesis.log"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range faults {
		if chaos.IsBrokerFault(f.Kind) && f.Error != "" {
			t.Errorf("fault %d %s of %s failed: %s", f.Index, f.Kind, f.Target, f.Error)
		}
	}
	return r
}
