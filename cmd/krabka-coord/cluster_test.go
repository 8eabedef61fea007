package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// A dead seed broker in --brokers does not fail describe, watch, fence or
// list (issue 10, bug 1): franz-go sends FindCoordinator to a seed in turn
// and does not retry it elsewhere, so the seed that does not answer is left
// out, with a warning. Several runs, because the seed's turn comes by
// rotation.
func TestDeadSeedBroker(t *testing.T) {
	cluster := kafkatest.Fake(t)
	brokers := closedAddr(t) + "," + strings.Join(cluster.Brokers, ",")
	conn := []string{"--brokers", brokers, "--partitions", "4", "--topic", "dead-seed"}
	createStateTopic(t, conn)
	if code, _, stderr := runCLI(t, nil, append([]string{"fence", "controller", "--force"}, conn...)...); code != exitOK {
		t.Fatalf("fence --force: exit %d: %s", code, stderr)
	}
	for i := range 4 {
		for _, args := range [][]string{
			{"describe", "controller"},
			{"fence", "controller"},
			{"watch", "controller", "--for", "300ms"},
			{"list"},
		} {
			code, _, stderr := runCLI(t, nil, append(args, conn...)...)
			if code != exitOK {
				t.Fatalf("run %d, %s with a dead seed: exit %d: %s", i, args[0], code, stderr)
			}
			if !strings.Contains(stderr, "does not answer") || !strings.Contains(stderr, "going on with "+cluster.Brokers[0]) {
				t.Fatalf("%s: stderr %q; want the warning about the dead seed", args[0], stderr)
			}
		}
	}
}

// A silent seed (it accepts and never answers) costs about a second once
// another seed answered, not the whole --connect-timeout (found by trying
// describe with a silent seed: 5.2 s each time).
func TestSilentSeedBroker(t *testing.T) {
	cluster := kafkatest.Fake(t)
	brokers := silentAddr(t) + "," + strings.Join(cluster.Brokers, ",")
	conn := []string{"--brokers", brokers, "--partitions", "4", "--topic", "silent-seed", "--connect-timeout", "20s"}
	createStateTopic(t, conn)
	start := time.Now()
	code, _, stderr := runCLI(t, nil, append([]string{"list"}, conn...)...)
	took := time.Since(start)
	if code != exitOK || !strings.Contains(stderr, "does not answer (no answer within 1s after seed "+cluster.Brokers[0]+" answered)") {
		t.Fatalf("list with a silent seed: exit %d, stderr %q", code, stderr)
	}
	if took > 10*time.Second {
		t.Fatalf("list with a silent seed took %v; want about a second more than without, far below --connect-timeout 20s", took)
	}
}

// watch --for counts from the printed state, not from the start: a slow
// cluster's setup does not eat it (found as "describe the configs of the
// state topic: context deadline exceeded", exit 4, from watch --for 500ms
// on a loaded broker).
func TestWatchForCountsAfterSetup(t *testing.T) {
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "4", "--topic", "slow-setup"}
	createStateTopic(t, conn)
	cluster.Fake.ControlKey(kmsg.DescribeConfigs.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.Fake.KeepControl()
		time.Sleep(700 * time.Millisecond) // deliberately slow: a loaded broker, what the test is about
		return nil, nil, false
	})
	code, stdout, stderr := runCLI(t, nil, append([]string{"watch", "controller", "--for", "300ms"}, conn...)...)
	if code != exitOK || !strings.Contains(stdout, "state") {
		t.Fatalf("watch --for 300ms on a slow cluster: exit %d, stdout %q, stderr %q; want 0 and the state", code, stdout, stderr)
	}
}

// A transaction coordinator that is not available for a while, as after
// the death of its broker, delays describe; it does not fail it (issue
// 10, bug 1: describe exited 4 for ten seconds after a broker fault).
func TestDescribeRetriesAMovedCoordinator(t *testing.T) {
	cluster := kafkatest.Fake(t)
	brokers := strings.Join(cluster.Brokers, ",")
	conn := []string{"--brokers", brokers, "--partitions", "4", "--topic", "moved"}
	createStateTopic(t, conn)
	if code, _, stderr := runCLI(t, nil, append([]string{"fence", "controller", "--force"}, conn...)...); code != exitOK {
		t.Fatalf("fence --force: exit %d: %s", code, stderr)
	}
	var refused atomic.Int32
	cluster.Fake.ControlKey(kmsg.DescribeTransactions.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.Fake.KeepControl()
		if refused.Add(1) > 3 {
			return nil, nil, false
		}
		resp := req.(*kmsg.DescribeTransactionsRequest).ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.(*kmsg.DescribeTransactionsRequest).TransactionalIDs {
			state := kmsg.NewDescribeTransactionsResponseTransactionState()
			state.TransactionalID, state.ErrorCode = id, kerr.CoordinatorNotAvailable.Code
			resp.TransactionStates = append(resp.TransactionStates, state)
		}
		return resp, nil, true
	})
	code, stdout, stderr := runCLI(t, nil, append([]string{"describe", "controller", "--output", "json"}, conn...)...)
	if code != exitOK {
		t.Fatalf("describe while the coordinator is not available: exit %d: %s", code, stderr)
	}
	var result describeJSON
	if err := json.Unmarshal([]byte(stdout), &result); err != nil || !result.Coordinator.Held {
		t.Fatalf("describe = %s (%v); want the coordinator's epoch", stdout, err)
	}
	if refused.Load() < 4 {
		t.Fatalf("the coordinator refused %d DescribeTransactions; want the 3 refusals and a retry", refused.Load())
	}
}

// A signal while a command connects ends it with exit code 0, as an
// interruption before the election does (issue 10, bug 2); it exited 4
// with "context canceled ... check --brokers". The broker here accepts
// the connection and never answers.
func TestSignalWhileConnecting(t *testing.T) {
	for _, args := range [][]string{
		{"elect", "controller", "node-1"},
		{"run", "controller", "node-1"},
		{"watch", "controller"},
		{"describe", "controller"},
	} {
		t.Run(args[0], func(t *testing.T) {
			addr, connecting := silentBroker(t)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			full := append(append([]string{}, args...), "--brokers", addr, "--connect-timeout", "30s")
			if args[0] == "run" {
				full = append(full, "--", "true")
			}
			cli := startCLI(ctx, nil, full...)
			select {
			case <-connecting: // the command dialed the broker, and waits for its answer
			case <-time.After(10 * time.Second):
				t.Fatal("the command did not connect to the broker")
			}
			cancel(errInterrupted) // what the first SIGINT does to the command's context
			select {
			case r := <-cli.done:
				if r.code != exitOK || !strings.Contains(r.stderr, "interrupted while connecting to Kafka") {
					t.Fatalf("exit %d, stderr %q; want 0 and the interruption", r.code, r.stderr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the command did not end on the signal")
			}
		})
	}
}

// A signal that stops doctor before its checks end exits 2, as a blocker,
// and says the cluster was not checked: doctor's 0 means every check
// passed, and a deployment gated on it must not go on (issue 29). It
// exited 0, as every other command interrupted before it changed
// anything. The broker here accepts the connection and never answers.
func TestDoctorSignalIsNotAllWell(t *testing.T) {
	addr, connecting := silentBroker(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cli := startCLI(ctx, nil, "doctor", "controller", "--brokers", addr, "--connect-timeout", "30s")
	select {
	case <-connecting:
	case <-time.After(10 * time.Second):
		t.Fatal("doctor did not connect to the broker")
	}
	cancel(errInterrupted) // what the first SIGINT does to the command's context
	select {
	case r := <-cli.done:
		if r.code != doctorBlocker || !strings.Contains(r.stderr, "the cluster was not checked") || r.stdout != "" {
			t.Fatalf("doctor interrupted: exit %d, stdout %q, stderr %q; want 2, nothing on stdout, and 'the cluster was not checked'", r.code, r.stdout, r.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("doctor did not end on the signal")
	}
}
