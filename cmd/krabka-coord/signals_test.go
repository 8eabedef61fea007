package main

import (
	"encoding/json"
	"regexp"
	"slices"
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
	createStateTopic(t, conn)
	env := cleanEnv()

	t.Run("SecondSignalEscalates", func(t *testing.T) {
		script := `trap "echo got TERM" TERM; echo "child $$"; while :; do sleep 0.1; done` // it does not exit on SIGTERM
		r := start(t, binary, env, append(append([]string{"run", "escalate", "node-1"}, conn...),
			"--lease-duration", "30s", "--renew-interval", "5s", "--grace", "20s", "--", "sh", "-c", script)...)
		r.waitFor(regexp.MustCompile(`child (\d+)`), 20*time.Second)
		r.signal(syscall.SIGTERM)
		r.waitFor(regexp.MustCompile(`signal: stopping the command`), 5*time.Second)
		r.waitFor(regexp.MustCompile(`got TERM`), 5*time.Second) // run waits out the grace now
		time.Sleep(sameStopWindow)                               // a signal within it is the same stop, not an escalation
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
		// Without heartbeats the holder cannot know that node-b is alive:
		// it says what it knows, and claims no takeover as a fact.
		a.waitFor(regexp.MustCompile(`stepped down: member node-a gave up role drained .*; the first standby in the roster, if any, takes over at once if it is alive;`), 5*time.Second)
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
		if code := b.wait(10 * time.Second); code != exitOK || !strings.Contains(b.stdout.String(), "resigned: member node-b gave up role drained") ||
			!strings.Contains(b.stdout.String(), "the first standby in the roster, if any, takes over at once if it is alive") {
			t.Fatalf("node-b: exit %d, stdout %q; want 0 and a resignation that claims no takeover as a fact", code, b.stdout.String())
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
		// A SIGUSR1 left pending would step down the leadership the moment
		// it began, before its first renewal: once node-b renewed, it had
		// its chance.
		first := waitDescribe(t, conn, "pending", func(r describeJSON) bool { return r.Lease != nil && r.Lease.Holder == "node-b" })
		waitDescribe(t, conn, "pending", func(r describeJSON) bool {
			return r.Lease != nil && r.Lease.Holder == "node-b" && r.Lease.GrantedAt.Millis > first.Lease.GrantedAt.Millis
		})
		if out := b.stdout.String() + b.stderr.String(); strings.Contains(out, "step-down") || strings.Contains(out, "stepped down") {
			t.Fatalf("node-b stepped down on the SIGUSR1 it got as a standby:\n%s", out)
		}
		b.signal(syscall.SIGTERM)
		if code := b.wait(10 * time.Second); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("node-b: exit %d, want %d (its command's SIGTERM)", code, 128+int(syscall.SIGTERM))
		}
	})
}

// TestRosterLivenessOfTheBinary: three elect processes; the standby of
// rank 0 is SIGKILLed, so it writes no more heartbeats and describe shows
// it lapsed after 3 heartbeat intervals; then the holder is SIGKILLed, and
// the standby behind the dead one takes over at the deadline, not one
// stagger later: the dead standby no longer holds it back. On kfake and
// on the real broker.
func TestRosterLivenessOfTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	binary := buildBinary(t)
	t.Run("kfake", func(t *testing.T) {
		rosterLiveness(t, binary, kafkatest.Fake(t), "liveness", "lapse", []string{"--lease-duration", "3s", "--renew-interval", "1s", "--challenge-stagger", "2s"}, 2*time.Second)
	})
	t.Run("kafka", func(t *testing.T) {
		cluster := kafkatest.Kafka(t)
		topic := kafkatest.TopicName("liveness")
		cluster.DeleteTopicAtCleanup(t, topic)
		rosterLiveness(t, binary, cluster, topic, kafkatest.TopicName("lapse"), []string{"--lease-duration", "6s", "--renew-interval", "2s", "--challenge-stagger", "3s"}, 3*time.Second)
	})
}

func rosterLiveness(t *testing.T, binary string, cluster *kafkatest.Cluster, topic, role string, timings []string, stagger time.Duration) {
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", topic}
	createStateTopic(t, conn)
	env := cleanEnv()
	lease := append(slices.Clone(timings), "--poll-interval", "200ms", "--heartbeat-interval", "1s")
	watch := start(t, binary, env, append([]string{"watch", role, "--output", "json", "--heartbeat-interval", "1s"}, conn...)...)
	a := start(t, binary, env, append(append([]string{"elect", role, "node-a"}, conn...), lease...)...)
	a.waitFor(electedText, 20*time.Second)
	b := start(t, binary, env, append(append([]string{"elect", role, "node-b"}, conn...), lease...)...)
	waitDescribe(t, conn, role, func(r describeJSON) bool { return len(r.Roster) == 2 })
	c := start(t, binary, env, append(append([]string{"elect", role, "node-c"}, conn...), lease...)...)
	waitDescribe(t, conn, role, func(r describeJSON) bool { return len(r.Roster) == 3 })

	b.signal(syscall.SIGKILL)
	b.wait(5 * time.Second)
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, stdout, _ := runCLI(t, nil, append([]string{"describe", role, "--output", "json", "--heartbeat-interval", "1s"}, conn...)...)
		var r describeJSON
		if code == exitOK && json.Unmarshal([]byte(stdout), &r) == nil && len(r.Roster) == 3 &&
			r.Roster[1].Member == "node-c" && r.Roster[1].Rank != nil && *r.Roster[1].Rank == 0 && r.Roster[2].Member == "node-b" && r.Roster[2].Lapsed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe never showed node-b lapsed and node-c at rank 0: %s", stdout)
		}
		time.Sleep(200 * time.Millisecond) // the poll interval of the condition wait
	}

	watch.waitFor(regexp.MustCompile(`"event":"lapsed","role":"[^"]+","member":"node-b"`), 5*time.Second)

	a.signal(syscall.SIGKILL)
	a.wait(5 * time.Second)
	c.waitFor(electedText, 20*time.Second)
	lines := watch.waitFor(regexp.MustCompile(`(\{[^\n]*"event":"takeover"[^\n]*\})`), 10*time.Second)
	var takeover roleEvent
	if err := json.Unmarshal([]byte(lines[1]), &takeover); err != nil || takeover.GrantedAt == nil || takeover.PreviousDeadline == nil {
		t.Fatalf("takeover event %s: %v", lines[1], err)
	}
	if takeover.Member != "node-c" {
		t.Fatalf("takeover by %s, want node-c", takeover.Member)
	}
	late := time.Duration(takeover.GrantedAt.Millis-takeover.PreviousDeadline.Millis) * time.Millisecond
	t.Logf("node-c took over %v after the holder's deadline (stagger %v)", late, stagger)
	if late >= stagger*3/4 {
		t.Fatalf("node-c took over %v after the deadline; want at the deadline, below the %v stagger of rank 1: the lapsed node-b held it back", late, stagger)
	}
	c.signal(syscall.SIGTERM)
	if code := c.wait(10 * time.Second); code != exitOK {
		t.Fatalf("node-c: exit %d", code)
	}
	watch.signal(syscall.SIGTERM)
	watch.wait(10 * time.Second)
}

// Two stop signals delivered together (a supervisor and a shell both
// forward a SIGTERM) are one stop, and leave the resignation to run; a
// later one cuts the grace short.
func TestStopBurstTellsTheSameStopFromAnEscalation(t *testing.T) {
	var b stopBurst
	t0 := time.Unix(1_700_000_000, 0)
	if b.started() || b.escalates(t0) {
		t.Fatal("the first stop signal escalates")
	}
	if !b.started() {
		t.Fatal("the first stop signal was not recorded")
	}
	if b.escalates(t0.Add(time.Millisecond)) {
		t.Fatal("a second signal 1 ms after the first escalates")
	}
	if b.escalates(t0.Add(sameStopWindow - time.Nanosecond)) {
		t.Fatal("a signal just inside the window escalates")
	}
	if !b.escalates(t0.Add(sameStopWindow)) {
		t.Fatal("a signal at the end of the window does not escalate")
	}
	if !b.escalates(t0.Add(2 * time.Second)) {
		t.Fatal("a second Ctrl-C 2 s later does not escalate")
	}
}
