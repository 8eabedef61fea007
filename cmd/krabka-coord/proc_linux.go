package main

// The process group of run's command, the parts that only Linux has: the
// parent-death signal, and a zombie told from a running process.

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// setParentDeathSignal asks Linux to SIGKILL the command when run dies
// without stopping it (SIGKILL of run itself).
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// groupAlive reports whether a process of the process group still runs. A
// zombie does not run: it waits for its parent to reap it.
func groupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, entry := range entries {
		if _, err := strconv.Atoi(entry.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + entry.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		end := bytes.LastIndexByte(stat, ')')
		if end < 0 {
			continue
		}
		fields := bytes.Fields(stat[end+1:])
		if len(fields) < 3 {
			continue
		}
		if group, err := strconv.Atoi(string(fields[2])); err == nil && group == pgid && string(fields[0]) != "Z" {
			return true
		}
	}
	return false
}
