//go:build unix

package main

import (
	"os/exec"
	"syscall"
	"time"
)

// setProcessGroup puts the command of run in a process group of its own, so
// that run signals the command and every process it started, and a Ctrl-C
// at the terminal reaches run alone.
func setProcessGroup(child *exec.Cmd) {
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(child.SysProcAttr)
}

// stopGroup stops the process group of the command: SIGTERM to the group,
// then SIGKILL to the group when the command or a process of its group is
// still there after grace. exited delivers the result of the command's
// Wait, and is nil when the command has exited already. It returns that
// result.
func stopGroup(child *exec.Cmd, exited <-chan error, grace time.Duration) error {
	pgid := child.Process.Pid
	var result error
	done := exited == nil
	if done && !groupAlive(pgid) {
		return nil
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		if done && !groupAlive(pgid) {
			return result
		}
		select {
		case result = <-exited:
			done, exited = true, nil
		case <-deadline.C:
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
