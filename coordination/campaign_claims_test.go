package coordination_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// TestDuplicateCampaignOfOneProcessIsRefusedAtOnce (issue 28): a second
// AcquireLeadership, TryAcquire or Elector.Run for a role and member that
// this process already campaigns for or holds over the same transport
// returns ErrDuplicateCampaign at once, before anything is written, and
// mints nothing: before, the second campaign fenced the first, which
// campaigned again and fenced it back, about twice a second. Another role
// of the member is no duplicate, and the claim ends with the leadership.
func TestDuplicateCampaignOfOneProcessIsRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := coordinationtest.NewCluster()
		transport := cluster.Transport("node-1")
		role, other, member := fxRole(t, "controller"), fxRole(t, "archiver"), fxMember(t, "node-1")
		options := []coordination.Option{coordination.WithPollInterval(100 * time.Millisecond)}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		held, err := coordination.AcquireLeadership(ctx, transport, role, member, options...)
		if err != nil {
			t.Fatalf("AcquireLeadership: %v", err)
		}
		token := held.Token()
		appended := transport.Calls(coordinationtest.OpAppend)

		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, coordination.ErrDuplicateCampaign) {
				t.Fatalf("%s of the held role and member = %v; want ErrDuplicateCampaign", what, err)
			}
		}
		_, err = coordination.AcquireLeadership(ctx, transport, role, member, options...)
		refused("a second AcquireLeadership", err)
		t.Logf("the refusal: %v", err)
		_, err = coordination.TryAcquire(ctx, transport, role, member, options...)
		refused("TryAcquire", err)
		elector, err := coordination.NewElector(transport, role, member, coordination.ElectorCallbacks{
			OnStartedLeading: func(ctx context.Context, _ *coordination.Leadership) { <-ctx.Done() }}, options...)
		if err != nil {
			t.Fatalf("NewElector: %v", err)
		}
		refused("Elector.Run", elector.Run(ctx))
		if got := transport.Calls(coordinationtest.OpAcquireEpoch); got != 1 {
			t.Fatalf("the refused calls minted: %d InitProducerId in all, want the holder's 1", got)
		}
		if got := transport.Calls(coordinationtest.OpAppend); got != appended {
			t.Fatalf("the refused calls appended %d records; want none", got-appended)
		}
		time.Sleep(time.Minute) // two renewals, which no duel fences
		if held.Err() != nil || cluster.Token(role) != token {
			t.Fatalf("the holder: Err %v, the coordinator's token %s; want %s held", held.Err(), cluster.Token(role), token)
		}

		// Another role of the member is another campaign.
		second, err := coordination.AcquireLeadership(ctx, transport, other, member, options...)
		if err != nil {
			t.Fatalf("AcquireLeadership of another role of the member: %v", err)
		}
		// The claim ends with the leadership.
		if err := held.Resign(ctx); err != nil {
			t.Fatalf("Resign: %v", err)
		}
		again, err := coordination.AcquireLeadership(ctx, transport, role, member, options...)
		if err != nil {
			t.Fatalf("AcquireLeadership after the resignation: %v", err)
		}
		for _, l := range []*coordination.Leadership{second, again} {
			if err := l.Resign(ctx); err != nil {
				t.Fatalf("Resign: %v", err)
			}
		}
	})
}

// TestDuplicateCampaignBesideARunningElector: while an Elector runs for a
// role and member, a second Elector and an AcquireLeadership of them over
// the same transport are refused with ErrDuplicateCampaign, whether the
// Elector holds the role or waits; once Run returned, the claim is free.
func TestDuplicateCampaignBesideARunningElector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := coordinationtest.NewCluster()
		transport := cluster.Transport("node-1")
		role, member := fxRole(t, "controller"), fxMember(t, "node-1")
		options := []coordination.Option{coordination.WithPollInterval(100 * time.Millisecond)}
		callbacks := coordination.ElectorCallbacks{OnStartedLeading: func(ctx context.Context, _ *coordination.Leadership) { <-ctx.Done() }}
		first, err := coordination.NewElector(transport, role, member, callbacks, options...)
		if err != nil {
			t.Fatalf("NewElector: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- first.Run(ctx) }()
		time.Sleep(time.Second)
		synctest.Wait()
		if cluster.Token(role) == (coordination.FencingToken{}) {
			t.Fatalf("the Elector does not hold the role after a second")
		}
		second, err := coordination.NewElector(transport, role, member, callbacks, options...)
		if err != nil {
			t.Fatalf("NewElector: %v", err)
		}
		if err := second.Run(ctx); !errors.Is(err, coordination.ErrDuplicateCampaign) {
			t.Fatalf("a second Elector's Run = %v; want ErrDuplicateCampaign", err)
		}
		if _, err := coordination.AcquireLeadership(ctx, transport, role, member, options...); !errors.Is(err, coordination.ErrDuplicateCampaign) {
			t.Fatalf("AcquireLeadership beside the Elector = %v; want ErrDuplicateCampaign", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("the Elector's Run: %v", err)
		}
		l, err := coordination.AcquireLeadership(t.Context(), transport, role, member, options...)
		if err != nil {
			t.Fatalf("AcquireLeadership after the Elector returned: %v", err)
		}
		if err := l.Resign(t.Context()); err != nil {
			t.Fatalf("Resign: %v", err)
		}
	})
}

// TestTwoApplicationsSharingARoleNameAreReported (issue 28): two
// applications, each with its own state topic, use one role name on one
// cluster, so one transactional id: each one's challenge fences the
// other's holder. A deposed member asks the coordinator which token
// fenced it, and sees no lease under it come to its topic by the
// deadline (with the rival-mint watch, also a challenger that waits in
// vain for a rival's lease); the second such mint within ten lease
// durations stops its Elector with a *ForeignEpochError that wraps
// ErrMisconfigured, instead of duelling for ever.
func TestTwoApplicationsSharingARoleNameAreReported(t *testing.T) {
	t.Run("default", func(t *testing.T) { twoApplications(t) })
	t.Run("rival-mint-watch", func(t *testing.T) { twoApplications(t, coordination.WithRivalMintWatch()) })
}

func twoApplications(t *testing.T, extra ...coordination.Option) {
	synctest.Test(t, func(t *testing.T) {
		cluster := coordinationtest.NewCluster()
		config, err := coordination.NewLeaseConfig(3*time.Second, time.Second, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		role := fxRole(t, "controller")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		type result struct {
			app string
			err error
		}
		results := make(chan result, 2)
		started := time.Now()
		for _, app := range []string{"app-a", "app-b"} {
			options := append([]coordination.Option{coordination.WithTopic(app + "-state"), coordination.WithLeaseConfig(config),
				coordination.WithPollInterval(100 * time.Millisecond)}, extra...)
			elector, err := coordination.NewElector(cluster.Transport(app+"-1"), role, fxMember(t, app+"-1"), coordination.ElectorCallbacks{
				OnStartedLeading: func(ctx context.Context, _ *coordination.Leadership) { <-ctx.Done() }}, options...)
			if err != nil {
				t.Fatalf("NewElector: %v", err)
			}
			go func() { results <- result{app, elector.Run(ctx)} }()
		}
		var first result
		select {
		case first = <-results:
		case <-time.After(5 * time.Minute):
			t.Fatalf("neither application stopped within 5 minutes of their duel (the coordinator's token: %s)", cluster.Token(role))
		}
		var foreign *coordination.ForeignEpochError
		if !errors.As(first.err, &foreign) || !errors.Is(first.err, coordination.ErrMisconfigured) || foreign.Topic != first.app+"-state" || len(foreign.Tokens) != 2 {
			t.Fatalf("%s's Run = %v; want a *ForeignEpochError of its topic with two tokens, wrapping ErrMisconfigured", first.app, first.err)
		}
		t.Logf("%s stopped after %v: %v", first.app, time.Since(started), first.err)
		cancel()
		if second := <-results; second.err != nil && !errors.Is(second.err, coordination.ErrMisconfigured) {
			t.Fatalf("%s's Run = %v; want nil (cancelled) or the same report", second.app, second.err)
		}
	})
}

// incomparableTransport is a transport value that == cannot compare.
type incomparableTransport struct {
	*coordinationtest.Transport
	tags map[string]string
}

// TestDuplicateCampaignClaimOfAnIncomparableTransport: a transport that
// == cannot compare cannot be claimed; its campaigns run as before, with
// no panic.
func TestDuplicateCampaignClaimOfAnIncomparableTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := coordinationtest.NewCluster()
		transport := incomparableTransport{Transport: cluster.Transport("node-1"), tags: map[string]string{}}
		held, err := coordination.AcquireLeadership(t.Context(), transport, fxRole(t, "controller"), fxMember(t, "node-1"))
		if err != nil {
			t.Fatalf("AcquireLeadership over an incomparable transport: %v", err)
		}
		if err := held.Resign(t.Context()); err != nil {
			t.Fatalf("Resign: %v", err)
		}
	})
}
