package coordination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ElectorCallbacks are what an [Elector] calls as its member gains and
// loses the role. OnStartedLeading is required; the other two may be nil.
type ElectorCallbacks struct {
	// OnStartedLeading runs the work of the role, on the goroutine of
	// [Elector.Run], each time the member takes the role. ctx is cancelled
	// when the leadership ends (a fence, a lost producer, the renew
	// deadline of [WithRenewDeadline]) or when Run's context ends, with
	// the reason as its cause ([context.Cause]); the callback returns
	// then. Guard every write of the role with l.Write.
	//
	// A callback that returns while the leadership still holds ends it:
	// Run resigns (the first standby takes over at once) and, one poll
	// interval later, campaigns again, at the tail of the roster. A callback that panics ends it
	// too: Run resigns, calls OnStoppedLeading, and panics again with the
	// same value, so a crash never leaves the renewals running.
	OnStartedLeading func(ctx context.Context, l *Leadership)

	// OnStoppedLeading runs after each leadership ended and the work
	// returned, with the reason: [Leadership.Err] (it wraps [ErrFenced],
	// [ErrProducerLost], [ErrRenewDeadline], [ErrNotAuthorized], or
	// [ErrNotHeld] after a resignation), or an error that names the panic
	// of OnStartedLeading. It runs only after an OnStartedLeading, on the
	// goroutine of Run.
	OnStoppedLeading func(err error)

	// OnNewLeader runs each time the log shows a new holder of the role,
	// this member included: the lease record that names it, with its
	// member and token. It runs once at the start when the role has a
	// holder, and then on each grant, takeover and reacquisition (not on
	// renewals), from a goroutine of Run's, one call at a time; it must
	// not block for long.
	OnNewLeader func(lease Lease)
}

// Elector keeps one member competing for one role: the keep-campaigning
// loop of client-go's LeaderElector and etcd's Campaign, over
// [AcquireLeadership].
//
// [Elector.Run] campaigns, runs OnStartedLeading while the member holds
// the role, and campaigns again when the leadership ends: after a fence
// ([ErrFenced]; the member rejoins at the tail of the roster, as the
// no-failback rule wants), a lost producer ([ErrProducerLost]), the renew
// deadline ([ErrRenewDeadline]), or a callback that returned. It stops on
// what no retry repairs: a missing permission ([ErrNotAuthorized]), a
// state topic or lease the cluster refuses ([ErrMisconfigured]), a second
// live process under the same member id ([ErrDuplicateMember]), a second
// campaign of this process for the member and role
// ([ErrDuplicateCampaign]). When Run's context ends it stops the work,
// resigns, and returns nil.
//
// An Elector is safe for concurrent use; Run runs once at a time.
type Elector struct {
	transport Transport
	role      Role
	member    MemberID
	callbacks ElectorCallbacks
	options   []Option
	logger    *slog.Logger
	settings  *settings
	running   atomic.Bool
}

// electorResignBound bounds the resignation of an [Elector]: it resigns
// under a context of its own, so it resigns after its context ended too.
const electorResignBound = 2 * time.Second

// NewElector builds the elector of one member for one role. The options
// are those of [AcquireLeadership], and they apply to every campaign;
// [Observe] reads with them for OnNewLeader. It returns an error, before
// anything is read or written, for a nil transport, the zero [Role] or
// [MemberID], a nil OnStartedLeading, and an invalid option.
func NewElector(transport Transport, role Role, member MemberID, callbacks ElectorCallbacks, options ...Option) (*Elector, error) {
	switch {
	case transport == nil:
		return nil, errors.New("coordination: NewElector: nil Transport")
	case role.IsZero():
		return nil, errors.New("coordination: NewElector: the zero Role: build the role with NewRole")
	case member.IsZero():
		return nil, errors.New("coordination: NewElector: the zero MemberID: build the member with NewMemberID")
	case callbacks.OnStartedLeading == nil:
		return nil, errors.New("coordination: NewElector: nil OnStartedLeading: the elector needs the work to run while leading")
	}
	s, err := newSettings(options)
	if err != nil {
		return nil, err
	}
	return &Elector{transport: transport, role: role, member: member, callbacks: callbacks, options: options, settings: s,
		logger: s.logger.With(slog.String("role", role.String()), slog.String("member", member.String()))}, nil
}

// Run campaigns for the role until ctx ends, and runs the callbacks. It
// returns nil when ctx ends, after the work returned and the member
// resigned (under a context of its own, bounded by 2 s plus the
// transport's bound on a write in flight, 250 ms over [KafkaTransport]),
// so a standby takes over at once. It returns an error that wraps
// [ErrNotAuthorized], [ErrMisconfigured] or [ErrDuplicateMember] when no
// retry helps, and an error for a second Run while one runs. A Run of a
// second Elector, or an [AcquireLeadership] or [TryAcquire], of the same
// role and member over the same transport and state topic, gets
// [ErrDuplicateCampaign] at once while this Run runs, and this Run gets it
// while one of theirs does.
//
// Run waits for OnStartedLeading to return before it resigns or campaigns
// again, so two leaderships of one elector never overlap; work that
// ignores its context keeps Run waiting. With [WithSuccessor], a Run whose
// context ends while it leads hands the role to the chosen member instead
// of resigning, which may take up to the transfer's bound
// ([WithTransferTimeout]).
func (e *Elector) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("coordination: Elector.Run: already running")
	}
	defer e.running.Store(false)
	partition, err := e.settings.partition(e.role)
	if err != nil {
		return err
	}
	release, err := claimCampaign("Elector.Run", "an Elector", e.transport, partition.Topic, e.role, e.member)
	if err != nil {
		return err
	}
	defer release()
	if e.callbacks.OnNewLeader != nil {
		observeCtx, stopObserving := context.WithCancel(ctx)
		var observer sync.WaitGroup
		defer func() { stopObserving(); observer.Wait() }()
		observer.Go(func() { e.reportLeaders(observeCtx) })
	}
	var fenced []Option // after a fence: the token that this elector saw fenced
	for {
		if ctx.Err() != nil {
			return nil
		}
		options := append(slices.Clone(e.options), withCampaignClaimed()) // Run holds the claim
		leader, err := AcquireLeadership(ctx, e.transport, e.role, e.member, append(options, fenced...)...)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		reason := e.lead(ctx, leader)
		if e.callbacks.OnStoppedLeading != nil {
			e.callbacks.OnStoppedLeading(reason)
		}
		if errors.Is(reason, ErrNotAuthorized) {
			return reason
		}
		if ctx.Err() != nil {
			return nil
		}
		e.logger.Info("coordination: the leadership ended; campaigning again", slog.Any("reason", reason))
		fenced = nil
		if errors.Is(reason, ErrFenced) {
			// A lease that still names the member under the fenced token
			// names a deposed member: the successor minted, and the elector
			// competes as a standby instead of fencing it (no failback).
			fenced = []Option{withFencedToken(leader.Token())}
		}
		if errors.Is(reason, ErrNotHeld) {
			// The work returned and the elector resigned: one poll
			// interval before it registers again, so that work that
			// returns at once does not mint an epoch in a hot loop.
			select {
			case <-ctx.Done():
				return nil
			case <-e.settings.clock.After(e.settings.pollInterval):
			}
		}
	}
}

// lead runs the work of one leadership, resigns when it returns, and
// returns why the leadership ended. A panic of the work resigns, reports,
// and panics again.
func (e *Elector) lead(ctx context.Context, leader *Leadership) error {
	work, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopJoin := context.AfterFunc(leader.Context(), func() { cancel(context.Cause(leader.Context())) })
	defer stopJoin()
	returned := false
	defer func() {
		if returned {
			return
		}
		recovered := recover()
		cancel(nil)
		e.resign(ctx, leader)
		err := fmt.Errorf("coordination: OnStartedLeading of member %s for role %s panicked: %v; the elector resigned the role", e.member, e.role, recovered)
		if e.callbacks.OnStoppedLeading != nil {
			e.callbacks.OnStoppedLeading(err)
		}
		panic(recovered)
	}()
	e.callbacks.OnStartedLeading(work, leader)
	returned = true
	cancel(nil)
	if ctx.Err() == nil || !e.handOver(ctx, leader) { // WithSuccessor: leadership_transfer.go
		e.resign(ctx, leader)
	}
	return leader.Err()
}

// resign gives the role up under a context of its own, bounded by
// electorResignBound, and waits for the renewal loop to end. On a
// leadership that ended already it writes nothing.
func (e *Elector) resign(ctx context.Context, leader *Leadership) {
	resign, cancel := context.WithTimeout(context.WithoutCancel(ctx), electorResignBound)
	defer cancel()
	if err := leader.Resign(resign); err != nil && !errors.Is(err, ErrNotHeld) {
		e.logger.Warn("coordination: the resignation did not land; the standbys wait for the lease deadline", slog.Any("error", err))
	}
}

// reportLeaders calls OnNewLeader for each new holder that the log shows,
// until ctx ends. It is a goroutine of Run.
func (e *Elector) reportLeaders(ctx context.Context) {
	var last *Lease
	for change, err := range Observe(ctx, e.transport, []Role{e.role}, e.options...) {
		if err != nil {
			e.logger.Debug("coordination: the elector's observer could not read the role; retrying", slog.Any("error", err))
			continue
		}
		lease := change.State.Lease
		if lease == nil {
			continue
		}
		switch change.Kind {
		case ChangeState, ChangeGranted, ChangeTakeover, ChangeReacquired:
		default:
			continue
		}
		if last != nil && last.Member == lease.Member && last.Token == lease.Token {
			continue
		}
		copied := *lease
		last = &copied
		e.callbacks.OnNewLeader(copied)
	}
}
