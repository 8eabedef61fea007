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

// startCLI runs a command line in process until ctx ends. Its output can
// be read while it runs; wait delivers the exit code and the output.
func startCLI(ctx context.Context, configure func(*globals), args ...string) *inProcess {
	r := &inProcess{done: make(chan cliResult, 1)}
	go func() {
		code := executeWith(ctx, args, &r.stdout, &r.stderr, func(string) string { return "" }, configure)
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
		time.Sleep(100 * time.Millisecond)
	}
}

// waitAddr waits for the metrics address that an elect in process prints.
func waitAddr(t *testing.T, h *inProcess) string {
	t.Helper()
	re := regexp.MustCompile(`metrics on http://([^/]+)/metrics`)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(h.stderr.String()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no metrics address in %q", h.stderr.String())
	return ""
}
