//go:build unix && !linux

package main

// The process group of run's command on a Unix other than Linux: no
// parent-death signal.

import "syscall"

// setParentDeathSignal does nothing: only Linux has a parent death signal.
func setParentDeathSignal(*syscall.SysProcAttr) {}

// groupAlive reports whether a process of the process group exists.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
