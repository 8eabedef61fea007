package main

// The pseudo-terminal of the job-control tests: a helper process leads a
// session on a terminal of its own, and the test types on it and reads
// what it shows.

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

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
		kafkatest.RequireOrSkip(t, fmt.Sprintf("no pseudo-terminal: %v", err))
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
		kafkatest.RequireOrSkip(t, fmt.Sprintf("no pseudo-terminal: %v %v", err, errno))
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		kafkatest.RequireOrSkip(t, fmt.Sprintf("no pseudo-terminal: %v", err))
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
