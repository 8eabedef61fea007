//go:build unix

package main

// The process group of run's command on Unix: its start in a group of its
// own, its stop (SIGTERM, then SIGKILL), and its exit code.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// setProcessGroup puts the command of run in a process group of its own, so
// that run signals the command and every process it started. On Linux the
// command, and only the command, gets SIGKILL when run dies without
// stopping it.
func setProcessGroup(child *exec.Cmd) {
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(child.SysProcAttr)
}

// startCommand starts the command of run in a process group of its own, and
// returns the channel of the result of its wait. When the command's stdin
// is run's controlling terminal, and run holds the terminal's foreground,
// the command's group gets the foreground, and run follows the command's
// job-control stops (see jobControl).
func startCommand(child *exec.Cmd, stderr io.Writer) (<-chan error, error) {
	setProcessGroup(child)
	var jobs *jobControl
	if child.Stdin == os.Stdin {
		jobs = newJobControl(stderr)
	}
	if jobs != nil && jobs.foreground() {
		child.SysProcAttr.Foreground = true
		child.SysProcAttr.Ctty = int(syscall.Stdin)
	}
	if err := child.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	if jobs == nil {
		go func() { exited <- child.Wait() }()
	} else {
		go func() { exited <- jobs.wait(child) }()
	}
	return exited, nil
}

// waitStatusError is the end of a command that run reaped itself: an exit
// code other than 0, or a signal.
type waitStatusError struct {
	status syscall.WaitStatus
}

func (e *waitStatusError) Error() string {
	if e.status.Signaled() {
		return "signal: " + e.status.Signal().String()
	}
	return fmt.Sprintf("exit status %d", e.status.ExitStatus())
}

// reapedExitCode is the exit code of a *waitStatusError: its own code, or
// 128+n for a signal n.
func reapedExitCode(err error) (int, bool) {
	var reaped *waitStatusError
	if !errors.As(err, &reaped) {
		return 0, false
	}
	if reaped.status.Signaled() {
		return 128 + int(reaped.status.Signal()), true
	}
	return reaped.status.ExitStatus(), true
}

// stopGroup stops the process group of the command: SIGTERM to the group
// now, then SIGKILL to the group when the command or a process of its
// group is still there at killAt, or at once when escalate delivers (a
// second Ctrl-C). exited delivers the result of the command's Wait, and is
// nil when the command has exited already. It returns that result.
func stopGroup(child *exec.Cmd, exited <-chan error, killAt time.Time, escalate <-chan os.Signal) error {
	pgid := child.Process.Pid
	if pgid <= 1 {
		// Never signal process group 1, nor -1: every process.
		return fmt.Errorf("no process group to stop (pid %d)", pgid)
	}
	var result error
	done := exited == nil
	if done && !groupAlive(pgid) {
		return nil
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	_ = syscall.Kill(-pgid, syscall.SIGCONT) // a stopped process acts on SIGTERM only once continued
	deadline := time.NewTimer(time.Until(killAt))
	defer deadline.Stop()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	kill := func() error {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if !done {
			result = <-exited
		}
		// SIGKILL cannot be caught; wait a moment for the group to go.
		for range 50 {
			if !groupAlive(pgid) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		return result
	}
	for {
		if done && !groupAlive(pgid) {
			return result
		}
		select {
		case result = <-exited:
			done, exited = true, nil
		case <-deadline.C:
			return kill()
		case <-escalate:
			return kill()
		case <-poll.C:
		}
	}
}

// signalExitCode returns 128+n for a command that signal n ended.
func signalExitCode(exit *exec.ExitError) (int, bool) {
	status, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !status.Signaled() {
		return 0, false
	}
	return 128 + int(status.Signal()), true
}
