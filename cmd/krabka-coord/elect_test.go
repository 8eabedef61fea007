package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

var fastLease = []string{"--lease-duration", "3s", "--renew-interval", "1s", "--challenge-stagger", "1s", "--poll-interval", "200ms"}

// A second live process under one member id is refused with exit code 2,
// before it writes anything: the holder keeps its registration (issue 10,
// bug 9: the second fenced the first, and describe showed the holder with
// an empty roster).
func TestElectRefusesALiveDuplicate(t *testing.T) {
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", "dup"}
	createStateTopic(t, conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := startCLI(ctx, nil, append(append([]string{"elect", "controller", "node-1"}, conn...), fastLease...)...)
	waitDescribe(t, conn, "controller", func(r describeJSON) bool { return r.Lease != nil && r.Lease.Holder == "node-1" })

	code, stdout, stderr := runCLI(t, nil, append(append([]string{"elect", "controller", "node-1"}, conn...), fastLease...)...)
	if code != exitUsage || stdout != "" {
		t.Fatalf("the duplicate: exit %d, stdout %q; want %d", code, stdout, exitUsage)
	}
	if !strings.Contains(stderr, "member node-1 of role controller is in use by another live process") {
		t.Fatalf("stderr %q", stderr)
	}
	after := waitDescribe(t, conn, "controller", func(describeJSON) bool { return true })
	if after.Lease == nil || after.Lease.Holder != "node-1" || len(after.Roster) != 1 || after.Roster[0].Member != "node-1" {
		t.Fatalf("after the duplicate: %+v; want node-1 holding and registered", after)
	}
	cancel()
	if r := first.wait(); r.code != exitOK {
		t.Fatalf("the first elect: exit %d: %s", r.code, r.stderr)
	}
}

// TestElectRefusesALiveDuplicateStandby: a second process under the name
// of a live standby is refused with exit code 2 once the standby's next
// heartbeat shows it alive, before it writes anything, and the standby
// keeps waiting (before, the newcomer's registration replaced the live
// standby's, which then gave up as the "duplicate"). A standby that died
// without leaving the roster is taken over after one heartbeat interval.
func TestElectRefusesALiveDuplicateStandby(t *testing.T) {
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", "dupsb"}
	createStateTopic(t, conn)
	lease := append(slices.Clone(fastLease), "--heartbeat-interval", "1s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := startCLI(ctx, nil, append(append([]string{"elect", "controller", "node-1"}, conn...), lease...)...)
	waitDescribe(t, conn, "controller", func(r describeJSON) bool { return r.Lease != nil && r.Lease.Holder == "node-1" })
	standby := startCLI(ctx, nil, append(append([]string{"elect", "controller", "node-2"}, conn...), lease...)...)
	waitDescribe(t, conn, "controller", func(r describeJSON) bool { return len(r.Roster) == 2 })

	code, stdout, stderr := runCLI(t, nil, append(append([]string{"elect", "controller", "node-2"}, conn...), lease...)...)
	if code != exitUsage || stdout != "" {
		t.Fatalf("the duplicate: exit %d, stdout %q, stderr %q; want %d", code, stdout, stderr, exitUsage)
	}
	if !strings.Contains(stderr, "member node-2 of role controller is in use by another live process: it waits as a standby") {
		t.Fatalf("stderr %q", stderr)
	}
	after := waitDescribe(t, conn, "controller", func(describeJSON) bool { return true })
	if len(after.Roster) != 2 || after.Roster[1].Member != "node-2" || after.Roster[1].Rank == nil || *after.Roster[1].Rank != 0 {
		t.Fatalf("after the duplicate: %+v; want node-2 still the standby of rank 0", after.Roster)
	}
	select {
	case r := <-standby.done:
		t.Fatalf("the live standby ended: exit %d: %s", r.code, r.stderr)
	default:
	}

	// A standby that crashed: its registration stays, and no heartbeat
	// follows. The next process under its name waits one heartbeat
	// interval, then campaigns (and runs out of --wait as rank 1).
	writeRegistration(t, cluster, "dupsb", 2, "controller", "ghost")
	code, _, stderr = runCLI(t, nil, append(append([]string{"elect", "controller", "ghost", "--wait", "4s"}, conn...), lease...)...)
	if code != exitFailure || !strings.Contains(stderr, "waiting up to 2.2s for its next heartbeat") || !strings.Contains(stderr, "not elected for role controller within --wait") {
		t.Fatalf("after a crashed standby: exit %d, stderr %q; want %d after the wait for a heartbeat", code, stderr, exitFailure)
	}
	cancel()
	if r := holder.wait(); r.code != exitOK {
		t.Fatalf("the holder: exit %d: %s", r.code, r.stderr)
	}
	if r := standby.wait(); r.code != exitOK {
		t.Fatalf("the standby: exit %d: %s", r.code, r.stderr)
	}
}

// A stop signal to a holder cut off from the brokers ends elect within
// the resignation's bound, with exit code 0 and a warning that the
// standbys take over at the deadline (issue 10, bug 11: it took 10 s and
// exited 1, and the message stuttered).
func TestElectStopsQuicklyWhenCutOff(t *testing.T) {
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", "cut"}
	createStateTopic(t, conn)
	network := newCutDialer(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := startCLI(ctx, func(g *globals) { g.dial = network.dial },
		append([]string{"elect", "controller", "node-1", "--lease-duration", "30s", "--renew-interval", "10s"}, conn...)...)
	waitDescribe(t, conn, "controller", func(r describeJSON) bool { return r.Lease != nil })
	network.dropNow() // the black hole is open when it returns: no wait
	stopped := time.Now()
	cancel(errInterrupted)
	select {
	case r := <-done.done:
		took := time.Since(stopped)
		if r.code != exitOK || !strings.Contains(r.stderr, "did not confirm its resignation within 2s") || strings.Contains(r.stderr, "resign role controller: resign role controller") {
			t.Fatalf("elect cut off, after the signal: exit %d, stderr %q; want 0 and the warning", r.code, r.stderr)
		}
		if took > 5*time.Second {
			t.Fatalf("elect took %v to stop; want the resignation's bound (2s) and the close (1s)", took)
		}
		t.Logf("elect stopped %v after the signal", took)
	case <-time.After(15 * time.Second):
		t.Fatal("elect did not stop")
	}
}

// elect --rejoin campaigns again after a fence, and counts it; a fence
// without --rejoin ends elect with exit code 3.
func TestElectRejoinsAfterAFence(t *testing.T) {
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", "rejoin"}
	createStateTopic(t, conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	member := startCLI(ctx, nil, append(append([]string{"elect", "controller", "node-1", "--rejoin", "--listen", "127.0.0.1:0"}, conn...), fastLease...)...)
	first := waitDescribe(t, conn, "controller", func(r describeJSON) bool { return r.Lease != nil })
	if code, _, stderr := runCLI(t, nil, append([]string{"fence", "controller"}, conn...)...); code != exitOK {
		t.Fatalf("fence: exit %d: %s", code, stderr)
	}
	again := waitDescribe(t, conn, "controller", func(r describeJSON) bool {
		return r.Lease != nil && r.Lease.Holder == "node-1" && r.Lease.Token.Token != first.Lease.Token.Token && r.Lease.Authoritative
	})
	t.Logf("node-1 took the role again under %s after the fence of %s", again.Lease.Token.Token, first.Lease.Token.Token)
	_, metrics := httpGet(t, "http://"+waitAddr(t, member)+"/metrics")
	for _, want := range []string{
		`krabka_coord_rejoins_total{after="fenced",role="controller"} 1`,
		`krabka_coord_leadership_changes_total{change="fenced",role="controller"} 1`,
		`krabka_coord_leadership_changes_total{change="acquired",role="controller"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
	cancel()
	if r := member.wait(); r.code != exitOK || !strings.Contains(r.stderr, "--rejoin: it campaigns again") {
		t.Fatalf("elect --rejoin: exit %d: %s", r.code, r.stderr)
	}

	// Without --rejoin: exit 3.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	member = startCLI(ctx, nil, append(append([]string{"elect", "controller", "node-2"}, conn...), fastLease...)...)
	waitDescribe(t, conn, "controller", func(r describeJSON) bool { return r.Lease != nil && r.Lease.Holder == "node-2" })
	if code, _, stderr := runCLI(t, nil, append([]string{"fence", "controller"}, conn...)...); code != exitOK {
		t.Fatalf("fence: exit %d: %s", code, stderr)
	}
	if r := member.wait(); r.code != exitFenced {
		t.Fatalf("elect without --rejoin after a fence: exit %d: %s", r.code, r.stderr)
	}
}
