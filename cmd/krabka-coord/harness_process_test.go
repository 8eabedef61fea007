package main

// The harness of the tests that run krabka-coord as an operator would, as
// a process: the binary, built into the test's temporary directory; each
// process in a process group of its own, killed with its group when the
// test ends; the output it writes while the test reads it; and the pids
// of the commands that run started.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildBinary builds krabka-coord into a temporary directory of the test.
func buildBinary(t *testing.T) string {
	t.Helper()
	// go test puts the bin directory of its own GOROOT first on the
	// test's PATH (Go 1.19), so "go" is the toolchain that runs the test.
	binary := filepath.Join(t.TempDir(), "krabka-coord")
	build := exec.Command("go", "build", "-o", binary, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return binary
}

// cleanEnv is the environment of the binary: without KRABKA_BROKERS, so
// that the demo on kfake stays on kfake, and without the SASL password.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, envBrokers+"=") || strings.HasPrefix(kv, envSASLPassword+"=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// syncBuffer is a buffer that a process writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is a running krabka-coord.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	code   int
}

// start starts the binary, in a process group of its own.
func start(t *testing.T, binary string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: strings.Join(args[:min(3, len(args))], " "), done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = childExitCode(err)
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", p.name, p.code, p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s: %v", p.name, err)
	}
}

// wait waits for the exit and returns the exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %v\nstdout:\n%s\nstderr:\n%s", p.name, timeout, p.stdout.String(), p.stderr.String())
		return -1
	}
}

// waitFor waits until the output matches re, and returns the submatches.
func (p *proc) waitFor(re *regexp.Regexp, timeout time.Duration) []string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.stdout.String() + p.stderr.String()); m != nil {
			return m
		}
		select {
		case <-p.done:
			if m := re.FindStringSubmatch(p.stdout.String() + p.stderr.String()); m != nil {
				return m
			}
			p.t.Fatalf("%s exited with %d before printing %s\nstdout:\n%s\nstderr:\n%s", p.name, p.code, re, p.stdout.String(), p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not print %s within %v\nstdout:\n%s\nstderr:\n%s", p.name, re, timeout, p.stdout.String(), p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // the poll interval of the condition wait
	}
}

// runBinary runs the binary to its end.
func runBinary(t *testing.T, binary string, env []string, timeout time.Duration, args ...string) (code int, stdout, stderr string, elapsed time.Duration) {
	t.Helper()
	begin := time.Now()
	p := start(t, binary, env, args...)
	code = p.wait(timeout)
	return code, p.stdout.String(), p.stderr.String(), time.Since(begin)
}

// running reports whether a process runs; a zombie does not.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	end := bytes.LastIndexByte(stat, ')')
	fields := bytes.Fields(stat[end+1:])
	return len(fields) > 0 && string(fields[0]) != "Z"
}

// killAtCleanup kills a pid that the test learned, if it still runs.
func killAtCleanup(t *testing.T, pid int) {
	t.Cleanup(func() {
		if running(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}
