package main

// The harness of the tests that run krabka-coord as an operator would, as
// a process: the binary, built into the test's temporary directory; each
// process in a process group of its own, killed with its group when the
// test ends; the output it writes while the test reads it; and the pids
// of the commands that run started.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
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

// start starts the binary, in a process group of its own, with SIGHUP's
// default disposition (childrenStartWithDefaultSIGHUP).
func start(t *testing.T, binary string, env []string, args ...string) *proc {
	t.Helper()
	return startProc(t, exec.Command(binary, args...), env, args)
}

// startIgnoringSIGHUP starts the binary as start does, but with SIGHUP
// ignored, as nohup starts a command: the test binary, run again as a
// wrapper (nohupEnv), ignores SIGHUP and execs the binary in its place, so
// the pid is the binary's.
func startIgnoringSIGHUP(t *testing.T, binary string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"--", binary}, args...)...)
	return startProc(t, cmd, append(slices.Clip(env), nohupEnv+"=1"), args)
}

// startProc starts cmd in a process group of its own; args name it in
// the test's messages.
func startProc(t *testing.T, cmd *exec.Cmd, env, args []string) *proc {
	t.Helper()
	p := &proc{t: t, name: strings.Join(args[:min(3, len(args))], " "), done: make(chan struct{})}
	p.cmd = cmd
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

// nohupEnv makes the test binary a wrapper that ignores SIGHUP and execs
// the command after its "--" (startIgnoringSIGHUP); TestMain reads it.
const nohupEnv = "KRABKA_COORD_TEST_NOHUP"

// execIgnoringSIGHUP is the wrapper of startIgnoringSIGHUP: it ignores
// SIGHUP and execs os.Args after "--" in its place (execve keeps an ignored
// signal ignored). It returns only on an error, which it prints.
func execIgnoringSIGHUP() {
	args := os.Args[1:]
	if len(args) < 2 || args[0] != "--" {
		fmt.Fprintf(os.Stderr, "%s: want -- COMMAND [ARG...], got %q\n", nohupEnv, args)
		os.Exit(2)
	}
	signal.Ignore(syscall.SIGHUP)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, nohupEnv+"=") {
			env = append(env, kv)
		}
	}
	err := syscall.Exec(args[1], args[1:], env)
	fmt.Fprintf(os.Stderr, "%s: exec %s: %v\n", nohupEnv, args[1], err)
	os.Exit(2)
}

// sighupSink receives, and drops, the SIGHUPs of a test process that was
// started with SIGHUP ignored (childrenStartWithDefaultSIGHUP).
var sighupSink = make(chan os.Signal, 1)

// childrenStartWithDefaultSIGHUP gives the processes that the tests start
// SIGHUP's default disposition however the test process was started, and
// reports whether SIGHUP was ignored at its start. Under nohup (a natural
// way to start the 15-minute test command) the test process inherits an
// ignored SIGHUP, os/exec keeps an ignored signal ignored in the child, and
// krabka-coord keeps a SIGHUP ignored at start ignored (signals.go): a test
// that hangs up on the CLI would wait in vain. A signal that the process
// handles is reset to the default in the child (Go's fork resets its
// handlers, and execve the caught signals), so the test process handles
// SIGHUP by dropping it: it still survives a hangup, as nohup asked, and
// its children start as they would from a terminal.
func childrenStartWithDefaultSIGHUP() bool {
	if !signal.Ignored(syscall.SIGHUP) {
		return false
	}
	signal.Notify(sighupSink, syscall.SIGHUP)
	return true
}

// sighupIgnoredAtStart is what childrenStartWithDefaultSIGHUP found.
var sighupIgnoredAtStart bool

// signalDisposition reads whether process pid ignores sig (SigIgn of Linux's
// /proc/PID/status) and whether it catches it (SigCgt).
func signalDisposition(pid int, sig syscall.Signal) (ignored, caught bool, err error) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, false, err
	}
	bit := uint64(1) << (uint(sig) - 1)
	found := 0
	for _, line := range strings.Split(string(status), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "SigIgn" && name != "SigCgt") {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64)
		if err != nil {
			return false, false, fmt.Errorf("/proc/%d/status: %s: %w", pid, name, err)
		}
		found++
		if name == "SigIgn" {
			ignored = mask&bit != 0
		} else {
			caught = mask&bit != 0
		}
	}
	if found != 2 {
		return false, false, fmt.Errorf("/proc/%d/status has no SigIgn and SigCgt lines", pid)
	}
	return ignored, caught, nil
}

// requireSIGHUPCaught fails the test, saying why, when p does not catch
// SIGHUP: a hangup would not stop it.
func (p *proc) requireSIGHUPCaught() {
	p.t.Helper()
	ignored, caught, err := signalDisposition(p.cmd.Process.Pid, syscall.SIGHUP)
	switch {
	case err != nil:
		p.t.Fatalf("%s: the disposition of SIGHUP: %v", p.name, err)
	case ignored || !caught:
		p.t.Fatalf("%s ignores SIGHUP (ignored %t, caught %t in /proc/%d/status): it inherited an ignored SIGHUP (the test process ignored it at start: %t, as under nohup), "+
			"and krabka-coord keeps a SIGHUP ignored at start ignored, so a hangup cannot stop it; the harness must start it with the default disposition (childrenStartWithDefaultSIGHUP)",
			p.name, ignored, caught, p.cmd.Process.Pid, sighupIgnoredAtStart)
	}
}
