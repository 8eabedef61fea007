package main

import (
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

func TestVersion(t *testing.T) {
	code, stdout, stderr := runCLI(t, nil, "--version")
	if code != exitOK || !strings.HasPrefix(stdout, "krabka-coord ") || !strings.Contains(stdout, "go1.") {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// The binary on the embedded cluster: a second SIGTERM while run waits out
// its command's grace sends SIGKILL at once, and SIGUSR1 makes elect step
// down and stay a standby.
func TestSignalsOfTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	binary := buildBinary(t)
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", "signals"}
	if code, _, stderr := runCLI(t, nil, append([]string{"create-topic", "--replication-factor", "1"}, conn...)...); code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
	env := cleanEnv()

	t.Run("SecondSignalEscalates", func(t *testing.T) {
		script := `trap "" TERM; echo "child $$"; while :; do sleep 0.1; done`
		r := start(t, binary, env, append(append([]string{"run", "escalate", "node-1"}, conn...),
			"--lease-duration", "30s", "--renew-interval", "5s", "--grace", "20s", "--", "sh", "-c", script)...)
		r.waitFor(regexp.MustCompile(`child (\d+)`), 20*time.Second)
		r.signal(syscall.SIGTERM)
		r.waitFor(regexp.MustCompile(`signal: stopping the command`), 5*time.Second)
		time.Sleep(500 * time.Millisecond)
		r.signal(syscall.SIGTERM)
		second := time.Now()
		if code := r.wait(10 * time.Second); code != 128+int(syscall.SIGKILL) {
			t.Fatalf("run after a second SIGTERM: exit %d, want %d (the command's SIGKILL)", code, 128+int(syscall.SIGKILL))
		}
		if took := time.Since(second); took > 4*time.Second {
			t.Fatalf("run took %v after the second signal; want at once, not the 20s grace", took)
		}
	})

	t.Run("StepDownOnSIGUSR1", func(t *testing.T) {
		lease := []string{"--lease-duration", "3s", "--renew-interval", "1s", "--challenge-stagger", "1s", "--poll-interval", "200ms"}
		a := start(t, binary, env, append(append([]string{"elect", "drained", "node-a"}, conn...), lease...)...)
		a.waitFor(electedText, 20*time.Second)
		b := start(t, binary, env, append(append([]string{"elect", "drained", "node-b"}, conn...), lease...)...)
		waitDescribe(t, conn, "drained", func(r describeJSON) bool { return len(r.Roster) == 2 })
		a.signal(syscall.SIGUSR1)
		b.waitFor(electedText, 5*time.Second)
		a.waitFor(regexp.MustCompile(`stepped down: member node-a gave up role drained`), 5*time.Second)
		after := waitDescribe(t, conn, "drained", func(r describeJSON) bool {
			return r.Lease != nil && r.Lease.Holder == "node-b" && len(r.Roster) == 2
		})
		if after.Roster[1].Member != "node-a" || *after.Roster[1].Rank != 0 {
			t.Fatalf("after the step-down: %+v; want node-a a standby", after.Roster)
		}
		a.signal(syscall.SIGTERM)
		b.signal(syscall.SIGTERM)
		if code := a.wait(10 * time.Second); code != exitOK {
			t.Fatalf("node-a: exit %d", code)
		}
		if code := b.wait(10 * time.Second); code != exitOK {
			t.Fatalf("node-b: exit %d", code)
		}
	})

	// A SIGUSR1 to a standby finds nothing to step down from: it is
	// reported and dropped. It once stayed pending and stepped down the
	// leadership the standby won later.
	t.Run("SIGUSR1ToAStandbyIsDropped", func(t *testing.T) {
		lease := []string{"--lease-duration", "3s", "--renew-interval", "1s", "--challenge-stagger", "1s", "--poll-interval", "200ms"}
		a := start(t, binary, env, append(append([]string{"elect", "pending", "node-a"}, conn...), lease...)...)
		a.waitFor(electedText, 20*time.Second)
		b := start(t, binary, env, append(append([]string{"run", "pending", "node-b"}, conn...), append(lease, "--grace", "500ms", "--max-clock-skew", "200ms", "--", "sh", "-c", "echo command runs; sleep 1000")...)...)
		waitDescribe(t, conn, "pending", func(r describeJSON) bool { return len(r.Roster) == 2 })
		b.signal(syscall.SIGUSR1)
		b.waitFor(regexp.MustCompile(`SIGUSR1: member node-b does not hold role pending, it waits for it: nothing to step down from`), 5*time.Second)
		a.signal(syscall.SIGTERM)
		if code := a.wait(10 * time.Second); code != exitOK {
			t.Fatalf("node-a: exit %d", code)
		}
		b.waitFor(regexp.MustCompile(`command runs`), 10*time.Second)
		time.Sleep(1500 * time.Millisecond)
		if out := b.stdout.String() + b.stderr.String(); strings.Contains(out, "step-down") || strings.Contains(out, "stepped down") {
			t.Fatalf("node-b stepped down on the SIGUSR1 it got as a standby:\n%s", out)
		}
		b.signal(syscall.SIGTERM)
		if code := b.wait(10 * time.Second); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("node-b: exit %d, want %d (its command's SIGTERM)", code, 128+int(syscall.SIGTERM))
		}
	})
}
