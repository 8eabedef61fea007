//go:build unix && !linux

package main

import "syscall"

// setParentDeathSignal does nothing: only Linux has a parent death signal.
func setParentDeathSignal(*syscall.SysProcAttr) {}

// groupAlive reports whether a process of the process group exists.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
