package main

import (
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// run looks its command up before it campaigns: a missing command exits
// 127 without an epoch or a registration (issue 10, bug 7).
func TestRunChecksTheCommandFirst(t *testing.T) {
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", "nocmd"}
	createStateTopic(t, conn)
	for _, tt := range []struct {
		command string
		code    int
	}{
		{"/nonexistent/command", exitNotFound},
		{"no-such-command-krabka", exitNotFound},
		{t.TempDir(), exitNoExec}, // a directory cannot be run
	} {
		code, stdout, stderr := runCLI(t, nil, append(append([]string{"run", "controller", "node-1"}, conn...), "--", tt.command)...)
		if code != tt.code || stdout != "" {
			t.Fatalf("run -- %s: exit %d, stdout %q; want %d", tt.command, code, stdout, tt.code)
		}
		assertOneLine(t, stderr, "run did not campaign")
	}
	// The role was never taken: describe says so.
	if code, _, stderr := runCLI(t, nil, append([]string{"describe", "controller"}, conn...)...); code != exitUsage || !strings.Contains(stderr, "never been taken") {
		t.Fatalf("describe after the refused runs: exit %d: %s", code, stderr)
	}
}
