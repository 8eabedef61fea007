package coordinationtest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// TestTransportConformance runs the conformance suite on the in-memory
// transport, the whole ExtendedTransport, and on the plain wrapper that
// hides the extensions (the specification's four interfaces only).
func TestTransportConformance(t *testing.T) {
	cluster := conformanceCluster(t)
	coordinationtest.TestTransport(t, coordinationtest.ConformanceTarget{
		NewTransport:      func(t *testing.T) coordination.Transport { return cluster.Transport(t.Name()) },
		GuardedTopic:      "commands",
		StallNextMint:     stallNextMint,
		LoseNextMintReply: loseNextMintReply,
	})
	t.Run("Plain", func(t *testing.T) {
		coordinationtest.TestTransport(t, coordinationtest.ConformanceTarget{
			NewTransport: func(t *testing.T) coordination.Transport { return coordinationtest.Plain(cluster.Transport(t.Name())) },
		})
	})
}

// conformanceCluster returns an in-memory cluster with the default state
// topic and lease policy.
func conformanceCluster(t *testing.T) *coordinationtest.Cluster {
	t.Helper()
	cluster := coordinationtest.NewCluster()
	cluster.SetTopicPartitions(coordination.StateTopic, coordination.DefaultPartitions)
	lease, err := coordination.NewLeaseConfig(coordination.DefaultLeaseDuration, coordination.DefaultRenewInterval, coordination.DefaultChallengeStagger)
	if err != nil {
		t.Fatal(err)
	}
	cluster.SetLeaseConfig(lease)
	return cluster
}

// stallNextMint holds the next mint of the in-memory transport (a broken
// adapter's embedded one too) at a gate until it started: a mint that
// waited for the coordinator.
func stallNextMint(t *testing.T, transport coordination.Transport, _ coordination.Role) {
	inner := innerOf(t, transport)
	started := inner.Calls(coordinationtest.OpAcquireEpoch)
	release := inner.Block(coordinationtest.OpAcquireEpoch)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inner.WaitCalls(coordinationtest.OpAcquireEpoch, started+1)
		release()
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("stallNextMint: no mint came to the gate")
		}
	})
}

// loseNextMintReply loses the reply of the next mint of the in-memory
// transport: the mint takes effect, and the caller gets an error.
func loseNextMintReply(t *testing.T, transport coordination.Transport, _ coordination.Role) {
	innerOf(t, transport).LoseNextReply(coordinationtest.OpAcquireEpoch, errors.New("the reply of the mint was lost"))
}

// innerOf returns the in-memory transport under a broken adapter.
func innerOf(t *testing.T, transport coordination.Transport) *coordinationtest.Transport {
	t.Helper()
	switch transport := transport.(type) {
	case *coordinationtest.Transport:
		return transport
	case deafWatches:
		return transport.Transport
	case unlessIgnored:
		return transport.Transport
	case leakyWatches:
		return transport.Transport
	case lateForgotten:
		return transport.Transport
	}
	t.Fatalf("stallNextMint: a transport of type %T", transport)
	return nil
}

// deafWatches is a broken adapter: its watches never fire.
type deafWatches struct{ *coordinationtest.Transport }

func (deafWatches) WatchPartition(coordination.TopicPartition) (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}

func (deafWatches) WatchRoles(coordination.TopicPartition, ...coordination.Role) (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}

// leakyWatches is a broken adapter: each subscription starts a goroutine
// that its stop does not end (the child process exits under it).
type leakyWatches struct{ *coordinationtest.Transport }

func (a leakyWatches) WatchPartition(partition coordination.TopicPartition) (<-chan struct{}, func()) {
	changed, stop := a.Transport.WatchPartition(partition)
	never := make(chan struct{})
	go func() { <-never }()
	return changed, stop
}

func (a leakyWatches) WatchRoles(partition coordination.TopicPartition, roles ...coordination.Role) (<-chan struct{}, func()) {
	return a.WatchPartition(partition)
}

// lateForgotten is a broken adapter: its LateMint never reports a mint.
type lateForgotten struct{ *coordinationtest.Transport }

func (lateForgotten) LateMint(coordination.Role, coordination.FencingToken) (minted, pending bool) {
	return false, false
}

// unlessIgnored is a broken adapter: its AcquireEpochUnless is a plain
// AcquireEpoch, which mints over a rival after a retry.
type unlessIgnored struct{ *coordinationtest.Transport }

func (a unlessIgnored) AcquireEpochUnless(ctx context.Context, role coordination.Role, _ coordination.FencingToken) (coordination.FencingToken, error) {
	return a.AcquireEpoch(ctx, role)
}

// brokenEnv names the broken adapter that TestBrokenAdapterUnderConformance
// runs the suite over, in the process that TestConformanceFailsBrokenAdapters
// starts.
const brokenEnv = "KRABKA_CONFORMANCE_BROKEN"

// TestBrokenAdapterUnderConformance runs the suite over the broken adapter
// that brokenEnv names, and nothing when it is unset: it is the child of
// TestConformanceFailsBrokenAdapters, which expects it to fail.
func TestBrokenAdapterUnderConformance(t *testing.T) {
	broken := os.Getenv(brokenEnv)
	if broken == "" {
		return // run only as the child process
	}
	cluster := conformanceCluster(t)
	coordinationtest.TestTransport(t, coordinationtest.ConformanceTarget{
		NewTransport: func(t *testing.T) coordination.Transport {
			inner := cluster.Transport(t.Name())
			switch broken {
			case "deaf":
				return deafWatches{inner}
			case "leaky":
				return leakyWatches{inner}
			case "late":
				return lateForgotten{inner}
			}
			return unlessIgnored{inner}
		},
		GuardedTopic:      "commands",
		StallNextMint:     stallNextMint,
		LoseNextMintReply: loseNextMintReply,
		Timeout:           time.Second,
	})
}

// TestConformanceFailsBrokenAdapters: the suite fails an adapter whose
// watches never fire (WatchPartition, WatchRoles), one whose stop leaves a
// goroutine of each subscription running (WatchStops), one whose LateMint
// never reports the mint of a lost reply, and one whose
// AcquireEpochUnless mints over a rival after a retry, naming the check
// and the call; the other checks pass. It runs the suite in a child
// process (the test binary again), as a failing *testing.T cannot be
// caught in this one.
func TestConformanceFailsBrokenAdapters(t *testing.T) {
	cases := []struct {
		broken, failing, message string
	}{
		{"deaf", "WatchPartition", "the channel did not receive"},
		{"deaf", "WatchRoles", "the channel did not receive"},
		{"leaky", "WatchStops", "the goroutines of stopped subscriptions end"},
		{"unless", "AcquireEpochUnlessAfterARivalsMint", "want an error that wraps ErrFenced and no mint"},
		{"late", "LateMintAfterALostReply", "LateMint reports it minted"},
	}
	outputs := map[string]string{}
	for _, c := range cases {
		output, ok := outputs[c.broken]
		if !ok {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestBrokenAdapterUnderConformance$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+c.broken)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite over the broken adapter %q passed; want it to fail:\n%s", c.broken, out)
			}
			output = string(out)
			outputs[c.broken] = output
		}
		if !strings.Contains(output, "--- FAIL: TestBrokenAdapterUnderConformance/"+c.failing+" ") || !strings.Contains(output, c.message) {
			t.Errorf("the suite over the broken adapter %q: want the check %s failed with %q; output:\n%s", c.broken, c.failing, c.message, output)
		}
		for _, line := range strings.Split(output, "\n") {
			if strings.Contains(line, "--- FAIL: TestBrokenAdapterUnderConformance/") && !expectedFailure(line, c.broken) {
				t.Errorf("the suite over the broken adapter %q failed a check it should pass: %s", c.broken, strings.TrimSpace(line))
			}
		}
	}
}

// expectedFailure reports whether a FAIL line names a check that the
// broken adapter should fail.
func expectedFailure(line, broken string) bool {
	switch broken {
	case "deaf":
		return strings.Contains(line, "/WatchPartition ") || strings.Contains(line, "/WatchRoles ")
	case "leaky":
		return strings.Contains(line, "/WatchStops ")
	case "late":
		return strings.Contains(line, "/LateMintAfterALostReply ")
	}
	return strings.Contains(line, "/AcquireEpochUnlessAfterARivalsMint ")
}
