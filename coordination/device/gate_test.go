package device_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
	"github.com/krabka-io/krabka-streams-go/coordination/device"
)

// gtCoordinator is a coordinator whose token the test sets, and that counts
// its DescribeEpoch calls.
type gtCoordinator struct {
	mu    sync.Mutex
	token coordination.FencingToken
	held  bool
	err   error
	calls atomic.Int64
	gate  chan struct{} // when set, DescribeEpoch waits for it
}

func (c *gtCoordinator) AcquireEpoch(context.Context, coordination.Role) (coordination.FencingToken, error) {
	return coordination.NoEpoch, errors.New("gtCoordinator mints nothing")
}

func (c *gtCoordinator) DescribeEpoch(ctx context.Context, _ coordination.Role) (coordination.FencingToken, bool, error) {
	c.calls.Add(1)
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return coordination.NoEpoch, false, ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return coordination.NoEpoch, false, c.err
	}
	if !c.held {
		return coordination.NoEpoch, false, nil
	}
	return c.token, true, nil
}

func (c *gtCoordinator) set(token coordination.FencingToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token, c.held = token, true
}

func gtNewGate(t testing.TB, c coordination.Coordinator) *device.Gate {
	t.Helper()
	gate, err := device.NewGate(c, fxRole(t, "controller"))
	if err != nil {
		t.Fatalf("NewGate: %v", err)
	}
	return gate
}

func gtRefused(t *testing.T, err error, token, current coordination.FencingToken) {
	t.Helper()
	var refused *device.FencedTokenError
	if !errors.As(err, &refused) || !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("Admit(%s) = %v, want a *FencedTokenError that wraps ErrFenced", token, err)
	}
	if refused.Token != token || refused.Current != current {
		t.Fatalf("FencedTokenError = %+v, want token %s and current %s", refused, token, current)
	}
}

// TestGateNeverRanksTokens: after the role's coordinator moved, the new
// leader's token 2:0 ranks below the deposed 1001:32766 under Compare. The
// gate admits the coordinator's token and refuses the other, whatever
// their order.
func TestGateNeverRanksTokens(t *testing.T) {
	ctx := context.Background()
	deposed, successor := fxToken(t, 1001, 32766), fxToken(t, 2, 0)
	if !deposed.Supersedes(successor) {
		t.Fatal("the scenario needs the deposed token to rank above the successor's")
	}
	c := &gtCoordinator{}
	c.set(deposed)
	gate := gtNewGate(t, c)
	if err := gate.Admit(ctx, deposed); err != nil {
		t.Fatalf("Admit of the leader's token: %v", err)
	}
	c.set(successor)
	if err := gate.Admit(ctx, successor); err != nil {
		t.Fatalf("Admit of the successor's token 2:0: %v", err)
	}
	calls := c.calls.Load()
	gtRefused(t, gate.Admit(ctx, deposed), deposed, successor)
	if err := gate.Admit(ctx, successor); err != nil {
		t.Fatalf("Admit of the successor's token again: %v", err)
	}
	if got := c.calls.Load(); got != calls {
		t.Fatalf("the deposed token and the cached one cost %d more requests, want none", got-calls)
	}
}

// TestGateAsksOnlyForANewToken: the cached token costs no request; an
// unknown one costs one, and a refused one is remembered.
func TestGateAsksOnlyForANewToken(t *testing.T) {
	ctx := context.Background()
	c := &gtCoordinator{}
	leader := fxToken(t, 7, 3)
	c.set(leader)
	gate := gtNewGate(t, c)
	for range 100 {
		if err := gate.Admit(ctx, leader); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.calls.Load(); got != 1 {
		t.Fatalf("100 commands of the leader cost %d requests, want 1", got)
	}
	stranger := fxToken(t, 99, 0) // an idempotent producer's pair, say
	gtRefused(t, gate.Admit(ctx, stranger), stranger, leader)
	gtRefused(t, gate.Admit(ctx, stranger), stranger, leader)
	gtRefused(t, gate.Admit(ctx, coordination.NoEpoch), coordination.NoEpoch, leader)
	if got := c.calls.Load(); got != 2 {
		t.Fatalf("a stranger twice and NoEpoch cost %d requests in all, want 2", got)
	}
}

// TestGateFailsClosed: when the coordinator does not answer, an unknown
// token is neither admitted nor refused; a later Admit asks again.
func TestGateFailsClosed(t *testing.T) {
	ctx := context.Background()
	cause := errors.New("COORDINATOR_NOT_AVAILABLE")
	c := &gtCoordinator{err: cause}
	gate := gtNewGate(t, c)
	token := fxToken(t, 5, 0)
	err := gate.Admit(ctx, token)
	if err == nil || errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("Admit with no answer = %v, want an error that is no refusal", err)
	}
	if !errors.Is(err, cause) || !strings.HasPrefix(err.Error(), "device: admit token 5:0 for role controller: ") || !strings.HasSuffix(err.Error(), "neither admitted nor refused: describe the epoch of role controller: COORDINATOR_NOT_AVAILABLE") {
		t.Fatalf("Admit with no answer = %q; want it to name the token, the role and the cause, and to wrap the cause", err)
	}
	c.mu.Lock()
	c.err = nil
	c.mu.Unlock()
	c.set(token)
	if err := gate.Admit(ctx, token); err != nil {
		t.Fatalf("Admit once the coordinator answers: %v", err)
	}
	// A role that no member took admits nothing.
	empty := gtNewGate(t, &gtCoordinator{})
	gtRefused(t, empty.Admit(ctx, token), token, coordination.NoEpoch)
}

// TestGateSharesARefresh: concurrent commands of a new leader share the
// refresh; a caller whose context ends stops waiting.
func TestGateSharesARefresh(t *testing.T) {
	c := &gtCoordinator{gate: make(chan struct{})}
	token := fxToken(t, 5, 1)
	c.set(token)
	gate := gtNewGate(t, c)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := gate.Admit(cancelled, token); !errors.Is(err, context.Canceled) {
		t.Fatalf("Admit with an ended context = %v, want context.Canceled", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() { errs[i] = gate.Admit(context.Background(), token) })
	}
	close(c.gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Admit %d: %v", i, err)
		}
	}
	if got := c.calls.Load(); got > 3 {
		t.Fatalf("21 concurrent Admits cost %d requests, want at most 3", got)
	}
}

// TestGateOverTheInMemoryCluster: a real coordinator: a leader's
// command, a forced failover, the successor's command, and the deposed
// leader's straggler.
func TestGateOverTheInMemoryCluster(t *testing.T) {
	ctx := context.Background()
	cluster := coordinationtest.NewCluster()
	role := fxRole(t, "controller")
	first, err := cluster.Transport("node-1").AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	gate, err := device.NewGate(cluster.Transport("device"), role)
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.Admit(ctx, first); err != nil {
		t.Fatalf("Admit of the first leader: %v", err)
	}
	second, err := cluster.Transport("node-2").AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.Admit(ctx, second); err != nil {
		t.Fatalf("Admit of the successor: %v", err)
	}
	gtRefused(t, gate.Admit(ctx, first), first, second)
	if _, err := device.NewGate(nil, role); err == nil {
		t.Fatal("NewGate(nil) succeeded")
	}
	if _, err := device.NewGate(cluster.Transport("device"), coordination.Role{}); err == nil {
		t.Fatal("NewGate with the zero Role succeeded")
	}
}

// BenchmarkGateAdmitCached is the cost of the gate per command of the
// current leader: no request, one mutex.
func BenchmarkGateAdmitCached(b *testing.B) {
	c := &gtCoordinator{}
	token := fxToken(b, 7, 3)
	c.set(token)
	gate := gtNewGate(b, c)
	ctx := context.Background()
	if err := gate.Admit(ctx, token); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := gate.Admit(ctx, token); err != nil {
			b.Fatal(err)
		}
	}
}
