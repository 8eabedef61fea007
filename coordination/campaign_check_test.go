package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// checkingTransport is an in-memory transport whose state-topic check
// answers what the test says.
type checkingTransport struct {
	*coordinationtest.Transport
	check   error
	options int // the options the last check received
}

func (c *checkingTransport) CheckStateTopic(_ context.Context, options ...coordination.Option) error {
	c.options = len(options)
	return c.check
}

func TestAcquireLeadershipStopsOnAMisconfiguredStateTopic(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	inner := cluster.Transport("node-1")
	transport := &checkingTransport{
		Transport: inner,
		check:     fmt.Errorf("the topic has 4 partitions, but this member is configured for 16: %w", coordination.ErrMisconfigured),
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := coordination.AcquireLeadership(ctx, transport, fxRole(t, "controller"), fxMember(t, "node-1"),
		coordination.WithPartitions(16))
	if !errors.Is(err, coordination.ErrMisconfigured) || !strings.Contains(err.Error(), "4 partitions") {
		t.Fatalf("AcquireLeadership = %v; want the check's error, which wraps ErrMisconfigured", err)
	}
	if transport.options != 1 {
		t.Errorf("the check received %d options; want the caller's 1", transport.options)
	}
	for _, op := range []coordinationtest.Op{coordinationtest.OpAppend, coordinationtest.OpReadPartition, coordinationtest.OpAcquireEpoch} {
		if n := inner.Calls(op); n != 0 {
			t.Errorf("%v ran %d times after a misconfigured check; want none", op, n)
		}
	}
}

func TestAcquireLeadershipWaitsThroughATransientCheckFailure(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	transport := &checkingTransport{Transport: cluster.Transport("node-1"), check: errors.New("broker not reachable yet")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leadership, err := coordination.AcquireLeadership(ctx, transport, fxRole(t, "controller"), fxMember(t, "node-1"),
		coordination.WithLogger(discardLogger()))
	if err != nil {
		t.Fatalf("AcquireLeadership after a transient check failure: %v", err)
	}
	if err := leadership.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
}

func TestAcquireLeadershipNamesTheLastTransportErrorWhenTheWaitEnds(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	transport := cluster.Transport("node-1")
	transport.Cut()
	ctx, cancel := context.WithCancel(context.Background())
	clock := coordination.NewManualClock(0)
	done := make(chan error, 1)
	go func() {
		_, err := coordination.AcquireLeadership(ctx, transport, fxRole(t, "controller"), fxMember(t, "node-1"),
			coordination.WithClock(clock), coordination.WithLogger(discardLogger()))
		done <- err
	}()
	transport.WaitCalls(coordinationtest.OpAppend, 1) // the registration failed on the cut
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cannot reach the cluster") {
		t.Fatalf("AcquireLeadership = %v; want context.Canceled naming the transport's last error", err)
	}
}

// discardLogger keeps the warnings of a loop that retries out of the test
// output.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// leasedTransport reports a lease policy of its own, as KafkaTransport does.
type leasedTransport struct {
	*coordinationtest.Transport
	lease coordination.LeaseConfig
}

func (l leasedTransport) LeaseConfig() coordination.LeaseConfig { return l.lease }

func TestAcquireLeadershipDefaultsToTheTransportsLeasePolicy(t *testing.T) {
	config, err := coordination.NewLeaseConfig(6*time.Second, 2*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster := coordinationtest.NewCluster()
	for _, test := range []struct {
		name    string
		options []coordination.Option
		want    time.Duration
	}{
		{"no timing option", nil, 6 * time.Second},
		{"an explicit lease duration wins", []coordination.Option{coordination.WithLeaseDuration(9 * time.Second), coordination.WithLogger(discardLogger())}, 9 * time.Second},
	} {
		t.Run(test.name, func(t *testing.T) {
			transport := leasedTransport{Transport: cluster.Transport("node-1"), lease: config}
			l, err := coordination.AcquireLeadership(ctx, transport, fxRole(t, "lease-"+test.want.String()), fxMember(t, "node-1"), test.options...)
			if err != nil {
				t.Fatalf("AcquireLeadership: %v", err)
			}
			defer l.Resign(ctx)
			if got := time.Duration(l.Lease().Deadline-l.Lease().GrantedAt) * time.Millisecond; got != test.want {
				t.Fatalf("the first lease spans %v; want %v", got, test.want)
			}
		})
	}
}
