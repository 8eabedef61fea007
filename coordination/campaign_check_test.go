package coordination_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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

func TestAcquireLeadershipLogsTheLastTransportErrorWhenTheWaitEnds(t *testing.T) {
	var logs syncBuffer
	cluster := coordinationtest.NewCluster()
	transport := cluster.Transport("node-1")
	transport.Cut()
	ctx, cancel := context.WithCancel(context.Background())
	clock := coordination.NewManualClock(0)
	done := make(chan error, 1)
	go func() {
		_, err := coordination.AcquireLeadership(ctx, transport, fxRole(t, "controller"), fxMember(t, "node-1"),
			coordination.WithClock(clock), coordination.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		done <- err
	}()
	transport.WaitCalls(coordinationtest.OpAppend, 1) // the registration failed on the cut
	cancel()
	err := <-done
	// The specification: "It returns the context error". The last error of
	// the transport goes to the log.
	if err != context.Canceled {
		t.Fatalf("AcquireLeadership = %v; want context.Canceled itself", err)
	}
	if !strings.Contains(logs.String(), "cannot reach the cluster") {
		t.Fatalf("the log holds no last error of the transport:\n%s", logs.String())
	}
}

// discardLogger keeps the warnings of a loop that retries out of the test
// output.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestAcquireLeadershipDefaultsToTheTransportsPolicy (issue 30, item 2:
// one door for the lease): over a transport that reports a lease policy
// (ExtendedTransport.LeaseConfig, as KafkaTransport does) that policy is
// the default; an option may change the renew interval, never the
// duration; and an option that gives another lease duration fails
// AcquireLeadership and TryAcquire at construction with ErrMisconfigured,
// in a message that names both durations, before anything is written.
func TestAcquireLeadershipDefaultsToTheTransportsPolicy(t *testing.T) {
	config, err := coordination.NewLeaseConfig(6*time.Second, 2*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, test := range []struct {
		name         string
		options      []coordination.Option
		lease, renew time.Duration // 0: refused
	}{
		{"no timing option", nil, 6 * time.Second, 2 * time.Second},
		{"the transport's policy", []coordination.Option{coordination.WithLeaseConfig(config)}, 6 * time.Second, 2 * time.Second},
		{"another renew interval", []coordination.Option{coordination.WithRenewInterval(3 * time.Second)}, 6 * time.Second, 3 * time.Second},
		{"another lease duration", []coordination.Option{coordination.WithLeaseDuration(30 * time.Second)}, 0, 0},
		{"the specification's policy", []coordination.Option{coordination.WithLeaseConfig(coordination.DefaultLeaseConfig())}, 0, 0},
	} {
		// A bubble: synctest.Wait returns when every goroutine of the
		// leadership waits, so "no renewal yet" is a fact, not a guess.
		t.Run(test.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cluster := coordinationtest.NewCluster()
				cluster.SetLeaseConfig(config)
				clock := coordination.NewManualClock(1_000_000)
				transport := cluster.Transport("node-1")
				role := fxRole(t, "lease-"+strings.ReplaceAll(test.name, " ", "-"))
				options := append(test.options, coordination.WithClock(clock), coordination.WithLogger(slog.New(slog.DiscardHandler)))
				if test.lease == 0 {
					for name, call := range map[string]func() (*coordination.Leadership, error){
						"AcquireLeadership": func() (*coordination.Leadership, error) {
							return coordination.AcquireLeadership(ctx, transport, role, fxMember(t, "node-1"), options...)
						},
						"TryAcquire": func() (*coordination.Leadership, error) {
							return coordination.TryAcquire(ctx, transport, role, fxMember(t, "node-1"), options...)
						},
					} {
						l, err := call()
						if l != nil || !errors.Is(err, coordination.ErrMisconfigured) {
							t.Fatalf("%s = %v, %v; want an error that wraps ErrMisconfigured", name, l, err)
						}
						if msg := err.Error(); !strings.Contains(msg, "6s") || !strings.Contains(msg, "30s") && !strings.Contains(msg, "15s") {
							t.Fatalf("%s: %q names not both lease durations", name, msg)
						}
					}
					if n := transport.Calls(coordinationtest.OpAppend) + transport.Calls(coordinationtest.OpAcquireEpoch); n != 0 {
						t.Fatalf("a refused call made %d appends and mints; want none", n)
					}
					return
				}
				l, err := coordination.AcquireLeadership(ctx, transport, role, fxMember(t, "node-1"), options...)
				if err != nil {
					t.Fatalf("AcquireLeadership: %v", err)
				}
				defer func() {
					if err := l.Resign(ctx); err != nil {
						t.Errorf("Resign: %v", err)
					}
				}()
				if got := time.Duration(l.Lease().Deadline-l.Lease().GrantedAt) * time.Millisecond; got != test.lease {
					t.Fatalf("the first lease spans %v; want %v", got, test.lease)
				}
				// The renewal comes at the renew interval, not earlier: 1 ms
				// before it the lease is the first grant still.
				first := l.Lease()
				clock.Advance(test.renew - time.Millisecond)
				synctest.Wait()
				if l.Lease() != first {
					t.Fatalf("renewed before the renew interval %v", test.renew)
				}
				clock.Advance(time.Millisecond)
				synctest.Wait()
				if l.Lease() == first {
					t.Fatalf("no renewal at the renew interval %v", test.renew)
				}
			})
		})
	}
}

// syncBuffer is a bytes.Buffer that a logger writes from many goroutines.
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

// slowMint is a transport of the four interfaces whose InitProducerId takes
// delay, and honours its context.
type slowMint struct {
	*specTransport
	delay    time.Duration
	attempts int
}

func (s *slowMint) AcquireEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, error) {
	s.attempts++
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return coordination.NoEpoch, ctx.Err()
	}
	return s.specTransport.AcquireEpoch(ctx, role)
}

// TestCampaignMintAttemptBoundGrows: a challenge's mint attempt is bounded
// (one poll interval, at least 500 ms), and the bound doubles after each
// attempt that ran out, so a cluster whose InitProducerId takes 1.2 s still
// serves the role, on the second attempt, with one epoch.
func TestCampaignMintAttemptBoundGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newSpecCluster()
		role := fxRole(t, "controller")
		transport := &slowMint{specTransport: cluster.client(), delay: 1200 * time.Millisecond}
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		l, err := coordination.AcquireLeadership(ctx, transport, role, fxMember(t, "node-1"), coordination.WithLogger(discardLogger()))
		if err != nil {
			t.Fatalf("AcquireLeadership over a 1.2 s InitProducerId = %v; want the role", err)
		}
		if transport.attempts != 2 || cluster.mintCount(role) != 1 {
			t.Fatalf("%d attempts, %d epochs; want 2 attempts (1 s, then 2 s) and one epoch", transport.attempts, cluster.mintCount(role))
		}
		l.Resign(context.Background())
	})
}
