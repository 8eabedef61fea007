//go:build !unix

package main

// The command of run without Unix: no process group and no signals; the
// command is killed.

import (
	"io"
	"os"
	"os/exec"
	"time"
)

// setProcessGroup does nothing without Unix process groups.
func setProcessGroup(*exec.Cmd) {}

// startCommand starts the command of run, and returns the channel of the
// result of its wait.
func startCommand(child *exec.Cmd, _ io.Writer) (<-chan error, error) {
	if err := child.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	return exited, nil
}

// reapedExitCode: run reaps no command itself without Unix.
func reapedExitCode(error) (int, bool) { return 0, false }

// stopGroup kills the command: without Unix signals there is no SIGTERM.
func stopGroup(child *exec.Cmd, exited <-chan error, _ time.Time, _ <-chan os.Signal) error {
	if exited == nil {
		return nil
	}
	_ = child.Process.Kill()
	return <-exited
}

// signalExitCode: no signals without Unix.
func signalExitCode(*exec.ExitError) (int, bool) { return 0, false }
