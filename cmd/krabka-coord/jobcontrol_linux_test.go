package main

// run at a terminal: the command's process group gets the terminal's
// foreground, so that a command that reads stdin does not stop on SIGTTIN,
// and run follows the command's job-control stops. The tests run the
// helper processes of TestHelperProcess on a pseudo-terminal of their own.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
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

// terminal is a pseudo-terminal with a helper process as the leader of its
// session, and the output the test read from it.
type terminal struct {
	t      *testing.T
	master *os.File
	lines  chan string
	seen   strings.Builder
	// unmatched holds the lines that no expect has matched yet: two
	// processes write to the terminal, so a line may come before the one
	// a test waits for first.
	unmatched []string
}

// startOnTerminal starts a helper process part as the session leader of a
// new pseudo-terminal, with the terminal as its stdin, stdout and stderr.
func startOnTerminal(t *testing.T, part string) *terminal {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var n uint32
	var unlock int32
	conn, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var errno syscall.Errno
	if err := conn.Control(func(fd uintptr) {
		if _, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
			return
		}
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		t.Skipf("no pseudo-terminal: %v %v", err, errno)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer slave.Close()

	helper := helperCommand(part)
	helper.Stdin, helper.Stdout, helper.Stderr = slave, slave, slave
	helper.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The helper leads the session: its group and every group of the
		// terminal are gone with a SIGKILL to each.
		_ = syscall.Kill(-helper.Process.Pid, syscall.SIGKILL)
		_ = helper.Wait()
	})
	term := &terminal{t: t, master: master, lines: make(chan string, 100)}
	go func() {
		defer close(term.lines)
		scanner := bufio.NewScanner(master)
		for scanner.Scan() {
			term.lines <- strings.TrimRight(scanner.Text(), "\r")
		}
	}()
	return term
}

// expect waits for a line that contains want, and returns it. A line that
// came earlier and matched no expect yet counts too.
func (term *terminal) expect(want string, timeout time.Duration) string {
	term.t.Helper()
	for i, line := range term.unmatched {
		if strings.Contains(line, want) {
			term.unmatched = append(term.unmatched[:i], term.unmatched[i+1:]...)
			return line
		}
	}
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-term.lines:
			if !ok {
				term.t.Fatalf("the terminal closed before %q; it showed:\n%s", want, term.seen.String())
			}
			term.seen.WriteString(line + "\n")
			if strings.Contains(line, want) {
				return line
			}
			term.unmatched = append(term.unmatched, line)
		case <-deadline:
			term.t.Fatalf("no %q within %v (the command is stopped, or run is); the terminal showed:\n%s", want, timeout, term.seen.String())
		}
	}
}

// typeText writes to the terminal as a user types.
func (term *terminal) typeText(text string) {
	term.t.Helper()
	if _, err := term.master.Write([]byte(text)); err != nil {
		term.t.Fatal(err)
	}
}

// A command that reads stdin reads the terminal, and run takes the
// foreground back when the command ends.
func TestRunCommandReadsTheTerminal(t *testing.T) {
	term := startOnTerminal(t, "run")
	term.expect("run: the command holds the foreground true", 10*time.Second)
	term.expect("ready", 10*time.Second)
	term.typeText("hello\n")
	term.expect("got hello", 10*time.Second)
	term.expect("run: exit 0, foreground back true", 10*time.Second)
}

// Ctrl-Z stops the command, and run stops with it, so the shell sees its
// job stop; fg continues both, and the command reads the terminal again.
func TestRunFollowsCtrlZ(t *testing.T) {
	term := startOnTerminal(t, "shell")
	term.expect("ready", 10*time.Second)
	term.typeText("\x1a") // Ctrl-Z
	term.expect("shell: job stopped by stopped", 10*time.Second)
	term.expect("shell: job continued", 10*time.Second)
	term.typeText("hello\n")
	term.expect("got hello", 10*time.Second)
	term.expect("run: exit 0, foreground back true", 10*time.Second)
	term.expect("shell: job exit 0", 10*time.Second)
}

// With no shell to stop for (run's process group is orphaned), Ctrl-Z
// does not freeze the command: run continues it at once.
func TestRunCtrlZWithoutAShell(t *testing.T) {
	term := startOnTerminal(t, "run")
	term.expect("ready", 10*time.Second)
	term.typeText("\x1a")
	term.typeText("hello\n")
	term.expect("got hello", 10*time.Second)
	term.expect("run: exit 0, foreground back true", 10*time.Second)
}

// SIGKILL of run: the kernel kills the command, the direct child, with it
// (the parent-death signal).
func TestParentDeathSignalKillsTheCommand(t *testing.T) {
	helper := helperCommand("pdeathsig")
	helper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = helper.Process.Kill()
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "child ")))
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	_ = helper.Process.Kill()
	_ = helper.Wait()
	deadline := time.Now().Add(3 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command %d still runs after SIGKILL of its parent", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
