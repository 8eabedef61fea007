package main

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stopGroup kills a command that ignores SIGTERM after the grace period, and
// the process that it started too.
func TestStopGroupKillsAfterGrace(t *testing.T) {
	child := exec.Command("sh", "-c", `trap "" TERM; sleep 30 & echo $!; wait`)
	setProcessGroup(child)
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	start := time.Now()
	result := stopGroup(child, exited, time.Now().Add(300*time.Millisecond), nil)
	elapsed := time.Since(start)
	if code := childExitCode(result); code != 137 {
		t.Fatalf("exit code %d, want 137 (SIGKILL)", code)
	}
	if elapsed < 300*time.Millisecond || elapsed > 3*time.Second {
		t.Fatalf("stopped after %v; want SIGKILL at the 300ms grace", elapsed)
	}
	deadline := time.Now().Add(2 * time.Second)
	for groupAlive(child.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the process group of %d (sleep %d) still runs", child.Process.Pid, grandchild)
		}
		time.Sleep(10 * time.Millisecond) // the poll interval of the condition wait
	}
}

// A command that exits on SIGTERM stops at once, and keeps its exit code.
func TestStopGroupCooperative(t *testing.T) {
	child := exec.Command("sh", "-c", `trap "exit 42" TERM; echo ready; while :; do sleep 0.05; done`)
	setProcessGroup(child)
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill() })
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	start := time.Now()
	if code := childExitCode(stopGroup(child, exited, time.Now().Add(10*time.Second), nil)); code != 42 {
		t.Fatalf("exit code %d, want 42", code)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("stopped after %v; want at once", elapsed)
	}
}
