package main

// run at a terminal: the command's process group gets the terminal's
// foreground, so that a command that reads stdin does not stop on SIGTTIN,
// and run follows the command's job-control stops. The tests run the
// helper processes of TestHelperProcess on a pseudo-terminal of their own.

import (
	"bufio"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A command that reads stdin reads the terminal, and run takes the
// foreground back when the command ends.
func TestRunCommandReadsTheTerminal(t *testing.T) {
	term := startOnTerminal(t, "run")
	term.expect("run: the command holds the foreground true", 10*time.Second)
	term.expect("ready", 10*time.Second)
	term.typeText("hello\n")
	term.expect("got hello", 10*time.Second)
	term.expect("run: exit 0, foreground back true", 10*time.Second)
}

// Ctrl-Z stops the command, and run stops with it, so the shell sees its
// job stop; fg continues both, and the command reads the terminal again.
func TestRunFollowsCtrlZ(t *testing.T) {
	term := startOnTerminal(t, "shell")
	term.expect("ready", 10*time.Second)
	term.typeText("\x1a") // Ctrl-Z
	term.expect("shell: job stopped by stopped", 10*time.Second)
	term.expect("shell: job continued", 10*time.Second)
	term.typeText("hello\n")
	term.expect("got hello", 10*time.Second)
	term.expect("run: exit 0, foreground back true", 10*time.Second)
	term.expect("shell: job exit 0", 10*time.Second)
}

// With no shell to stop for (run's process group is orphaned), Ctrl-Z
// does not freeze the command: run continues it at once.
func TestRunCtrlZWithoutAShell(t *testing.T) {
	term := startOnTerminal(t, "run")
	term.expect("ready", 10*time.Second)
	term.typeText("\x1a")
	term.typeText("hello\n")
	term.expect("got hello", 10*time.Second)
	term.expect("run: exit 0, foreground back true", 10*time.Second)
}

// SIGKILL of run: the kernel kills the command, the direct child, with it
// (the parent-death signal).
func TestParentDeathSignalKillsTheCommand(t *testing.T) {
	helper := helperCommand("pdeathsig")
	helper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = helper.Process.Kill()
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "child ")))
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	_ = helper.Process.Kill()
	_ = helper.Wait()
	deadline := time.Now().Add(3 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command %d still runs after SIGKILL of its parent", pid)
		}
		time.Sleep(10 * time.Millisecond) // the poll interval of the condition wait
	}
}
