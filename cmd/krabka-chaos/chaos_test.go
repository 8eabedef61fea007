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
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestChaosShort builds krabka-chaos and runs it against the real broker of
// KRABKA_KAFKA_BROKERS with every fault kind but the broker restart, for
// KRABKA_CHAOS_DURATION (2 minutes by default). KRABKA_CHAOS_BROKER_RESTART=1
// adds the broker restart, through scripts/kafka-stop.sh --kill and
// scripts/kafka-start.sh --restart-keep-data. KRABKA_CHAOS_SEED sets the seed
// (1 by default).
//
// The orchestrator runs in a process group of its own, with its members;
// the cleanup kills the whole group, so no member outlives the test.
func TestChaosShort(t *testing.T) {
	cluster := kafkatest.Kafka(t)
	duration := 2 * time.Minute
	if value := os.Getenv("KRABKA_CHAOS_DURATION"); value != "" {
		d, err := time.ParseDuration(value)
		if err != nil {
			t.Fatalf("KRABKA_CHAOS_DURATION=%q: %v", value, err)
		}
		duration = d
	}
	seed := "1"
	if value := os.Getenv("KRABKA_CHAOS_SEED"); value != "" {
		seed = value
	}
	faults := "pause,kill,cut,skew"
	var restartCmd string
	if os.Getenv("KRABKA_CHAOS_BROKER_RESTART") == "1" {
		scripts, err := filepath.Abs("../../scripts")
		if err != nil {
			t.Fatal(err)
		}
		faults += ",broker-restart"
		restartCmd = scripts + "/kafka-stop.sh --kill && " + scripts + "/kafka-start.sh --restart-keep-data"
	}

	bin := filepath.Join(t.TempDir(), "krabka-chaos")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "run")
	args := []string{"run", "--brokers", strings.Join(cluster.Brokers, ","),
		"--duration", duration.String(), "--seed", seed, "--faults", faults, "--out", dir, "--json"}
	if restartCmd != "" {
		args = append(args, "--broker-restart-cmd", restartCmd, "--broker-restart-every", (duration / 2).String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration+5*time.Minute)
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
	err := cmd.Wait()
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
	if want := max(3, int(duration/(20*time.Second))); r.LeadershipChanges < want {
		t.Errorf("%d leadership changes in %s; want at least %d", r.LeadershipChanges, duration, want)
	}
	if r.Acknowledged == 0 {
		t.Error("no command was acknowledged")
	}
	if t.Failed() {
		t.Logf("run directory kept for inspection: %s", dir)
	}
}

func TestRunRejectsBadUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	ctx := context.Background()
	for _, args := range [][]string{
		nil,
		{"fly"},
		{"run", "--brokers", ""},
		{"check"},
		{"member", "--id", "m1"},
		{"run", "--no-such-flag"},
	} {
		if args != nil && len(args) == 3 && args[2] == "" {
			t.Setenv("KRABKA_KAFKA_BROKERS", "")
		}
		if code := run(ctx, args, &out, &errOut); code != exitUsage {
			t.Errorf("run(%q) = %d; want %d (usage)", args, code, exitUsage)
		}
	}
}
