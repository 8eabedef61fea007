//go:build unix && !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

// Job control of run on a Unix without it: the command never gets the
// terminal's foreground.

import (
	"io"
	"os/exec"
)

// jobControl: on this system the command of run never gets the terminal's
// foreground (see proc_jobcontrol.go).
type jobControl struct{}

func newJobControl(io.Writer) *jobControl      { return nil }
func (*jobControl) foreground() bool           { return false }
func (*jobControl) wait(child *exec.Cmd) error { return child.Wait() }
