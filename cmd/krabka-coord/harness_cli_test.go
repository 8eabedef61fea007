package main

// The harness of the tests that run command lines of krabka-coord in
// process, where the race detector and the leak check see their
// goroutines: run to the end, or started and read while they run, and the
// waits for what describe shows and for the address that --listen serves.

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"
)

// runCLI runs the command line in process, with the environment env.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(key string) string { return env[key] }
	code = execute(context.Background(), args, &out, &errOut, getenv)
	return code, out.String(), errOut.String()
}

// startCLI runs a command line in process until ctx ends, with an empty
// environment. Its output can be read while it runs; wait delivers the
// exit code and the output.
func startCLI(ctx context.Context, configure func(*globals), args ...string) *inProcess {
	return startCLIEnv(ctx, nil, configure, args...)
}

// startCLIEnv is startCLI with the environment env.
func startCLIEnv(ctx context.Context, env map[string]string, configure func(*globals), args ...string) *inProcess {
	r := &inProcess{done: make(chan cliResult, 1)}
	go func() {
		code := executeWith(ctx, args, &r.stdout, &r.stderr, func(key string) string { return env[key] }, configure)
		r.done <- cliResult{code, r.stdout.String(), r.stderr.String()}
	}()
	return r
}

// inProcess is a command line that runs in process.
type inProcess struct {
	done           chan cliResult
	stdout, stderr syncBuffer
}

// wait waits for the end of the command line.
func (r *inProcess) wait() cliResult { return <-r.done }

// waitFor waits until the output (stdout and stderr) matches re, and
// returns the submatches.
func (r *inProcess) waitFor(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(r.stdout.String() + r.stderr.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v\nstdout:\n%s\nstderr:\n%s", re, timeout, r.stdout.String(), r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // the poll interval of the condition wait
	}
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// waitDescribe polls describe until ok holds.
func waitDescribe(t *testing.T, conn []string, role string, ok func(describeJSON) bool) describeJSON {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, stdout, _ := runCLI(t, nil, append([]string{"describe", role, "--output", "json"}, conn...)...)
		var result describeJSON
		if code == exitOK && json.Unmarshal([]byte(stdout), &result) == nil && ok(result) {
			return result
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe %s: the state did not come: %s", role, stdout)
		}
		time.Sleep(100 * time.Millisecond) // the poll interval of the condition wait
	}
}

// waitAddr waits for the metrics address that an elect in process prints.
func waitAddr(t *testing.T, h *inProcess) string {
	t.Helper()
	return h.waitFor(t, metricsAddr, 10*time.Second)[1]
}
