package main

// The helper processes of the job-control tests: the test binary, run
// again as one part (run, a job-control shell, a parent that dies), chosen
// by KRABKA_COORD_TEST_HELPER.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// helperEnv selects the part that the test binary plays in a helper
// process.
const helperEnv = "KRABKA_COORD_TEST_HELPER"

// readerScript is a command that reads a line of its stdin.
const readerScript = `echo "ready $$"; read line; echo "got $line"`

// TestHelperProcess is not a test: it is the helper process of the tests
// below, and does nothing without KRABKA_COORD_TEST_HELPER.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "run":
		// As run does: the command, with run's stdin, in a group of its own.
		child := exec.Command("sh", "-c", readerScript)
		child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
		exited, err := startCommand(child, os.Stderr)
		if err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		pgrp, _ := tcgetpgrp(0)
		fmt.Printf("run: the command holds the foreground %t\n", pgrp == child.Process.Pid)
		code := childExitCode(<-exited)
		back := false
		if jobs := newJobControl(io.Discard); jobs != nil {
			back = jobs.foreground()
		}
		fmt.Printf("run: exit %d, foreground back %t\n", code, back)
		os.Exit(0)
	case "shell":
		// A job-control shell, in short: it starts run as a foreground
		// job, and continues it with fg when it stops.
		signal.Ignore(syscall.SIGTTOU)
		job := helperCommand("run")
		job.Stdin, job.Stdout, job.Stderr = os.Stdin, os.Stdout, os.Stderr
		job.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: 0}
		if err := job.Start(); err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		pid := job.Process.Pid
		for {
			var status syscall.WaitStatus
			if _, err := syscall.Wait4(pid, &status, syscall.WUNTRACED, nil); err == syscall.EINTR {
				continue
			} else if err != nil {
				fmt.Println("wait:", err)
				os.Exit(1)
			}
			if status.Stopped() {
				_ = tcsetpgrp(0, syscall.Getpgrp())
				fmt.Printf("shell: job stopped by %v\n", status.StopSignal())
				// The user's pause before fg: part of the scenario, not a
				// wait for anything (run stays stopped until the SIGCONT).
				time.Sleep(200 * time.Millisecond)
				_ = tcsetpgrp(0, pid) // fg
				_ = syscall.Kill(-pid, syscall.SIGCONT)
				fmt.Println("shell: job continued")
				continue
			}
			fmt.Printf("shell: job exit %d\n", status.ExitStatus())
			os.Exit(0)
		}
	case "pdeathsig":
		child := exec.Command("sleep", "60")
		exited, err := startCommand(child, os.Stderr)
		if err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		fmt.Printf("child %d\n", child.Process.Pid)
		<-exited
		os.Exit(0)
	}
}

// helperCommand runs the test binary as the helper process part.
func helperCommand(part string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+part)
	return cmd
}
