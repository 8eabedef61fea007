//go:build !unix

package main

import (
	"os/exec"
	"time"
)

// setProcessGroup does nothing without Unix process groups.
func setProcessGroup(*exec.Cmd) {}

// stopGroup kills the command: without Unix signals there is no SIGTERM.
func stopGroup(child *exec.Cmd, exited <-chan error, _ time.Duration) error {
	if exited == nil {
		return nil
	}
	_ = child.Process.Kill()
	return <-exited
}

// signalExitCode: no signals without Unix.
func signalExitCode(*exec.ExitError) (int, bool) { return 0, false }
