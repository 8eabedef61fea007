//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

// Job control of run at a terminal: the command gets the terminal's
// foreground, and run follows its stops, as a shell's job would.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
	"unsafe"
)

// jobControl lets the command of run use the terminal that run's stdin is,
// as a shell's job would: the command's process group gets the terminal's
// foreground while run holds it, so that the command can read the terminal
// and Ctrl-C, Ctrl-\ and Ctrl-Z reach it; run takes the foreground back when
// the command ends. When a terminal signal (SIGTSTP, SIGTTIN, SIGTTOU) stops
// the command, run takes the foreground back and stops its own process group
// with the same signal, so that the shell sees its job stop; when the shell
// continues the job, run gives the foreground to the command again (under
// fg, not under bg) and continues it.
type jobControl struct {
	fd     int // run's stdin, its controlling terminal
	pgrp   int // run's process group
	stderr io.Writer
}

// newJobControl returns nil when run's stdin is not its controlling
// terminal: a file, a pipe, /dev/null, or a terminal of another session.
func newJobControl(stderr io.Writer) *jobControl {
	fd := int(syscall.Stdin)
	if _, err := tcgetpgrp(fd); err != nil {
		return nil
	}
	return &jobControl{fd: fd, pgrp: syscall.Getpgrp(), stderr: stderr}
}

// foreground reports whether run's process group holds the terminal's
// foreground: a shell started run as a foreground job.
func (j *jobControl) foreground() bool {
	pgrp, err := tcgetpgrp(j.fd)
	return err == nil && pgrp == j.pgrp
}

// give hands the terminal's foreground to a process group. A process
// outside the foreground group that changes it gets SIGTTOU, which would
// stop it, so run ignores SIGTTOU for the call.
func (j *jobControl) give(pgrp int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = tcsetpgrp(j.fd, pgrp)
}

// reclaim takes the foreground back from the command's process group, when
// that group holds it.
func (j *jobControl) reclaim(pgid int) {
	if pgrp, err := tcgetpgrp(j.fd); err == nil && pgrp == pgid {
		j.give(j.pgrp)
	}
}

// wait waits for the command as exec.Cmd.Wait does, and follows its stops
// meanwhile. It reaps the command itself, and returns nil or a
// *waitStatusError.
func (j *jobControl) wait(child *exec.Cmd) error {
	pid := child.Process.Pid // and the process group of the command
	continued := make(chan os.Signal, 1)
	signal.Notify(continued, syscall.SIGCONT)
	defer signal.Stop(continued)
	for {
		var status syscall.WaitStatus
		_, err := syscall.Wait4(pid, &status, syscall.WUNTRACED, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			j.reclaim(pid)
			return err
		}
		if status.Stopped() {
			j.suspend(pid, status.StopSignal(), continued)
			continue
		}
		// No child.Process.Release: it sets Pid to -1, which stopGroup
		// reads, and a process group of 1 is every process.
		j.reclaim(pid)
		if status.Exited() && status.ExitStatus() == 0 {
			return nil
		}
		return &waitStatusError{status: status}
	}
}

// suspend follows a stop of the command. A stop by SIGSTOP is not a
// terminal's: whoever sent it continues the command.
func (j *jobControl) suspend(pgid int, sig syscall.Signal, continued <-chan os.Signal) {
	name, ok := map[syscall.Signal]string{syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN", syscall.SIGTTOU: "SIGTTOU"}[sig]
	if !ok {
		return
	}
	j.reclaim(pgid)
	for len(continued) > 0 {
		<-continued
	}
	// Stop run's process group as the terminal would have, had it been the
	// foreground: the shell waits for that group. The kernel discards the
	// signal when the group is orphaned (no shell waits for it).
	_ = syscall.Kill(0, sig)
	// When the group stopped, SIGCONT came the moment it was continued; a
	// timer that ran out meanwhile must not hide it.
	resumed := false
	for _, wait := range []time.Duration{time.Second, 100 * time.Millisecond} {
		select {
		case <-continued:
			resumed = true
		case <-time.After(wait):
		}
		if resumed {
			break
		}
	}
	switch {
	case j.foreground():
		j.give(pgid)
	case !resumed:
		fmt.Fprintf(j.stderr, "krabka-coord: warning: the command stopped on %s, and run cannot stop with it: its process group is orphaned; continue the command with 'kill -CONT -%d'\n",
			name, pgid)
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
}

// tcgetpgrp returns the foreground process group of the terminal fd; it
// fails when fd is not the caller's controlling terminal.
func tcgetpgrp(fd int) (int, error) {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, errno
	}
	return int(pgrp), nil
}

// tcsetpgrp makes pgrp the foreground process group of the terminal fd.
func tcsetpgrp(fd, pgrp int) error {
	value := int32(pgrp) //nolint:gosec // a process group id is a pid_t, an int32, from getpgrp
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&value))); errno != 0 {
		return errno
	}
	return nil
}
