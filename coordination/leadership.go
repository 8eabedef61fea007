package coordination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Leadership is the live leadership of one member over one role.
//
// The handle carries the epoch that the transaction coordinator minted, and
// the caller passes that epoch to every guarded write. The broker fences a
// write of an older epoch, so the caller proves its authority with the write
// itself and asks no question first.
//
// The handle renews the lease in the background. The renewal keeps the
// standbys from a challenge, and it adds no safety. [Leadership.Done] closes
// when the leadership ends, and [Leadership.Err] then says why. A caller
// watches Done and stops the work of the role at once. A member that keeps
// competing loops: acquire, work until Done closes, acquire again.
//
// The background renewal is a goroutine that the handle owns: it starts in
// [AcquireLeadership] and ends when the leadership ends. Every write of the
// handle (a renewal, [Leadership.Write], the resignation's tombstone) takes
// one write slot, because they share the role's transactional producer; a
// caller waits for the slot no longer than its context allows. Guarded
// writes that wait for the slot together share one transaction (the group
// commit of [Leadership.Write]). No write starts after Done closes.
//
// A Leadership is safe for concurrent use.
type Leadership struct {
	transport Transport
	role      Role
	member    MemberID
	partition TopicPartition
	token     FencingToken
	settings  *settings
	logger    *slog.Logger

	// slot is held for every write: the writes share the role's
	// transactional producer. It is a channel, not a mutex, so a caller
	// waiting for it gives up when its context ends.
	slot chan struct{}

	mu        sync.Mutex // guards lease, err, preempt, renewGate, queue and expect
	lease     Lease
	err       error
	preempt   context.CancelCauseFunc // cancels the guarded write in flight; nil when none
	writeFrom int64                   // when the guarded write in flight began, in ms by the leadership's clock
	renewGate chan struct{}           // non-nil while a due renewal waits for the slot; closed when it has it
	queue     []*writeCall            // the guarded writes that wait for the next transaction (group_commit.go)
	expect    int                     // after a shared transaction: its calls and the calls queued when it ended (gather)

	done     chan struct{} // closed by end, once
	stop     chan struct{} // closed by Resign to stop the renewal loop
	stopOnce sync.Once
	stopLoop context.CancelFunc // cancels a renewal in flight
	loopDone chan struct{}      // closed when the renewal loop returns

	ctx    context.Context         // Context(): cancelled by end, with its error as the cause
	cancel context.CancelCauseFunc // cancels ctx

	heartbeated bool // the campaign wrote a heartbeat, which Resign clears
}

// startLeadership builds the handle after the first lease write and starts
// its renewal loop.
func startLeadership(c *campaign, lease Lease) *Leadership {
	loopCtx, stopLoop := context.WithCancel(context.Background())
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Leadership{
		transport: c.transport,
		role:      c.role,
		member:    c.member,
		partition: c.partition,
		token:     lease.Token,
		settings:  c.settings,
		logger:    c.logger.With(slog.String("token", lease.Token.String())),
		lease:     lease,
		slot:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		ctx:       ctx,
		cancel:    cancel,
		stop:      make(chan struct{}),
		stopLoop:  stopLoop,
		loopDone:  make(chan struct{}),

		heartbeated: c.heartbeated,
	}
	go l.renewLoop(loopCtx)
	if c.settings.renewDeadline > 0 {
		go l.watchRenewDeadline(c.settings.renewDeadline) // renew_deadline.go
	}
	return l
}

// Role returns the role that this member holds.
func (l *Leadership) Role() Role { return l.role }

// Member returns the member that holds the role.
func (l *Leadership) Member() MemberID { return l.member }

// Partition returns the partition of the coordination topic that holds every
// record of the role.
func (l *Leadership) Partition() TopicPartition { return l.partition }

// Token returns the quorum-minted proof of this leadership. The caller
// passes it to every guarded write. It never changes: a leadership is one
// epoch, and a new epoch is a new leadership.
func (l *Leadership) Token() FencingToken { return l.token }

// Lease returns the lease record that this member wrote last. Its Deadline,
// in milliseconds since the Unix epoch, tells how long the standbys wait
// before they challenge, and nothing about authority.
func (l *Leadership) Lease() Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease
}

// Done returns a channel that closes when the leadership ends: on a fence,
// on [Leadership.Resign], and on a producer lost without a fence or a
// permission refused (see [Leadership.Err], which says which), and, with
// [WithRenewDeadline], when no renewal was confirmed within the deadline. It
// closes exactly once. A caller that wants to keep competing calls
// [AcquireLeadership] again after it closes.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Err returns the reason the leadership ended, and nil while it holds. The
// error of a fence wraps [ErrFenced], and the error of a resignation wraps
// [ErrNotHeld]. Two more reasons end a leadership, because no later write
// under its token can land: a producer lost without a fence (the error
// wraps [ErrProducerLost]; compete again), and a permission the cluster
// refuses ([ErrNotAuthorized]). With [WithRenewDeadline], a leadership
// whose renewals were not confirmed within the deadline ends with an error
// that wraps [ErrRenewDeadline], while its token may still be the
// coordinator's pair. Once set, it never changes.
func (l *Leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Renew writes a fresh lease record under the same epoch. The background
// loop calls it at every renew interval, and a caller that drives its own
// schedule calls it too. It returns when the transport's write returns; ctx
// bounds the write, and the wait for a write in flight of the same
// leadership.
//
// A renewal that the broker fences ends the leadership. Renew then returns
// an error that wraps [ErrFenced], and [Leadership.Done] closes. So does a
// renewal that gets [ErrProducerLost] or [ErrNotAuthorized]. A renewal that
// fails for another, transient reason leaves the leadership as it is and
// returns the transport's error. Renew on an ended leadership writes nothing and
// returns an error that wraps [ErrNotHeld], and the fence too if a fence
// ended it.
func (l *Leadership) Renew(ctx context.Context) error {
	if err := l.lock(ctx, "renew"); err != nil {
		return err
	}
	defer l.unlock()
	return l.renewHeld(ctx)
}

// renewHeld writes one renewal. The caller holds the write slot.
func (l *Leadership) renewHeld(ctx context.Context) error {
	if err := l.endedErr("renew"); err != nil {
		return err
	}
	lease := l.settings.lease.Grant(l.member, l.token, l.settings.clock.NowMillis())
	err := l.transport.WriteLease(ctx, l.partition, l.token, EncodeKey(LeaseKey(l.role)), EncodeLease(lease))
	if err != nil {
		err = wrapf(err, nil, "renewal by member %s", l.member)
		if endsLeadership(err) || errors.Is(err, ErrNotAuthorized) {
			l.end(err) // no renewal under the token can land again
		}
		return err
	}
	l.mu.Lock()
	l.lease = lease
	l.mu.Unlock()
	return nil
}

// Write writes the caller's own records, such as commands to devices, in
// one transaction under the epoch of this leadership, and returns after the
// commit. It is the guarded write: the broker refuses it once another member
// minted a newer epoch, so a deposed leader's records never become visible
// to a read_committed reader after its successor's first write.
//
// The transport must implement [GuardedWriter]; [KafkaTransport] does. Write
// is safe to call from many goroutines and concurrently with the background
// renewal. The role has one transactional producer, which runs one
// transaction at a time, so the writes take turns on one write slot with
// the renewals and the resignation.
//
// # Group commit
//
// Calls that arrive while a transaction of the leadership is in flight wait
// in a queue, and the next transaction writes all of them: one
// AddPartitionsToTxn, Produce and EndTxn for the lot, the records of each
// call together and in their order, the calls in the order they queued. A
// call that finds nothing in flight starts its transaction at once and
// waits for no company. Each call returns its own outcome:
//
//   - The shared transaction commits: every call of it returns nil.
//   - The broker fences the token: every call of the transaction returns an
//     error that wraps [ErrFenced], none of their records is visible, and
//     the leadership ends; the calls still queued return an error that
//     wraps [ErrNotHeld] and the fence.
//   - The transaction's outcome is unknown, or the producer is lost (the
//     error wraps [ErrProducerLost]): every call of it returns that error,
//     which says whether the records may have committed, and the
//     leadership ends.
//   - The transaction fails without committing anything and leaves the
//     leadership alone: a record for a topic that the member may not write
//     (TOPIC_AUTHORIZATION_FAILED; the error wraps [ErrNotAuthorized]) or
//     that does not exist, a record too large, a transient broker error,
//     the end of one call's context before anything was sent. One call
//     does not fail the others: when the transaction carried more than one
//     call, each call whose context still runs is written again at once in
//     a transaction of its own, in the same order, and returns the outcome
//     of that one. A call whose context ended returns the shared
//     transaction's error. (The retry rests on the contract of
//     [GuardedWriter]: an error that wraps none of ErrFenced,
//     ErrProducerLost and ErrOutcomeUnknown means that nothing committed;
//     see mayHaveCommitted.)
//   - A due renewal preempts the transaction (below): every call of it
//     returns the error that says so.
//
// ctx bounds the call. A call whose context ends while it waits in the
// queue leaves the queue and returns the context's error; nothing of it is
// written. A transaction runs under the contexts of all its calls, the
// earliest deadline among them included: the first context to end ends the
// transaction for all of them, as the end of a caller's context ends its
// own write. Over [KafkaTransport] the calls then return at most 250 ms
// after that context ended; a transaction still in flight then ends in the
// background, and every call of it returns an error that wraps
// [ErrOutcomeUnknown]: its records may commit, or not. The leadership goes
// on, and no call of such a transaction is written again.
//
// A write never lets the lease lapse: a renewal that falls due while a
// transaction of writes holds the slot waits for it until one renew
// interval before the lease's deadline (the lease duration minus two renew
// intervals on the regular schedule: 10 s with the defaults), then cancels
// it, and the queued writes wait for the renewal.
// A renewal shares no transaction with guarded writes: it goes alone,
// ahead of the queue, so that a caller's record (refused, or slow to be
// acknowledged) never holds the lease back, at the cost of one transaction
// per renew interval.
// Over [KafkaTransport] records not yet sent are then failed and the
// transaction is aborted, so nothing of it commits and the leadership goes
// on, while a transaction already in flight ends in the background as
// above (ErrOutcomeUnknown).
//
// Write on an ended leadership writes nothing and returns an error that
// wraps [ErrNotHeld]. It rejects an empty list, a record without a topic or
// with a negative partition, and a record for the coordination topic,
// before anything is queued.
func (l *Leadership) Write(ctx context.Context, records ...GuardedRecord) error {
	writer, ok := l.transport.(GuardedWriter)
	if !ok {
		return fmt.Errorf("coordination: transport %T does not implement GuardedWriter", l.transport)
	}
	if len(records) == 0 {
		return errors.New("coordination: Write: no records")
	}
	for i, record := range records {
		switch {
		case record.Topic == "":
			return fmt.Errorf("coordination: Write: record %d has no topic", i)
		case record.Topic == l.partition.Topic:
			return fmt.Errorf("coordination: Write: record %d is for the coordination topic %s, which holds only registrations and leases", i, record.Topic)
		case record.Partition < 0:
			return fmt.Errorf("coordination: Write: record %d has partition %d", i, record.Partition)
		}
	}
	if err := l.endedErr("write"); err != nil {
		return err
	}
	if done, err := l.writeAlone(ctx, writer, records); done {
		return err
	}
	return l.awaitWrite(writer, &writeCall{ctx: ctx, records: records, outcome: make(chan error, 1)})
}

// errPreempted is the cause with which a due renewal cancels a guarded
// write that holds the write slot too long.
var errPreempted = errors.New("the write held the role's producer past the due renewal of the lease, so the renewal cancelled it")

// Resign gives the role up. It stops the renewal loop and writes a tombstone
// on the lease key, so the first standby challenges at once instead of at
// the deadline. It then writes a tombstone on the member's registration key
// (and on its heartbeat key, if it wrote a heartbeat while it waited),
// so the member leaves the roster: a later [AcquireLeadership] of the same
// member joins at the tail. It ends the leadership, whatever the writes do,
// and it returns their error.
//
// A ctx that has already ended does not stop the tombstones: Resign then
// writes them under a short context of its own (600 ms). Resign returns
// within its context plus the transport's bound on a write in flight (250
// ms for [KafkaTransport]), or within a second when ctx had already ended. Resign is safe to call twice and
// concurrently with [Leadership.Renew] and [Leadership.Write]: a second call
// writes nothing, and returns nil when a resignation ended the leadership,
// or an error that wraps [ErrNotHeld] and the cause when something else did,
// such as [ErrFenced] for a fence.
//
// Resign waits for a write in flight, such as a renewal, because the
// tombstone goes through the same producer. When the context ends first it
// ends the leadership without a tombstone, and the standbys wait for the
// deadline.
//
// Resign takes no epoch back. The member keeps the epoch it minted until
// another member mints a newer one, and the broker still accepts a write of
// the resigned member until then. A caller that resigns stops its own
// guarded writes.
func (l *Leadership) Resign(ctx context.Context) error {
	l.stopOnce.Do(func() {
		close(l.stop)
		l.stopLoop()
	})
	defer func() { <-l.loopDone }()

	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cleanupBound)
		defer cancel()
	}
	if err := l.lock(ctx, "resign"); err != nil {
		if l.Err() == nil {
			l.end(fmt.Errorf("coordination: member %s resigned role %s without a tombstone: %w", l.member, l.role, ErrNotHeld))
		}
		return err
	}
	defer l.unlock()
	if err := l.Err(); err != nil {
		if errors.Is(err, ErrNotHeld) {
			return nil // an earlier resignation
		}
		return wrapf(err, []error{ErrNotHeld}, "resign role %s", l.role)
	}
	// The two tombstones go out together, so that the call returns within
	// its context plus one abandonGrace of the transport, not two.
	var leaseErr, registrationErr error
	var tombstones sync.WaitGroup
	tombstones.Go(func() {
		registrationErr = l.transport.Append(ctx, l.partition, EncodeKey(RegistrationKey(l.role, l.member)), nil)
	})
	if l.heartbeated {
		// Hygiene only: a heartbeat without a registration counts for
		// nothing, but compaction keeps it until a tombstone replaces it.
		tombstones.Go(func() {
			if err := l.transport.Append(ctx, l.partition, EncodeKey(HeartbeatKey(l.role, l.member)), nil); err != nil {
				l.logger.Warn("coordination: the tombstone of the heartbeat failed; it counts for nothing without a registration", slog.Any("error", err))
			}
		})
	}
	leaseErr = l.transport.WriteLease(ctx, l.partition, l.token, EncodeKey(LeaseKey(l.role)), nil)
	tombstones.Wait()
	if leaseErr != nil && errors.Is(leaseErr, ErrFenced) {
		err := fmt.Errorf("coordination: resignation of role %s by %s under %s: %w", l.role, l.member, l.token, leaseErr)
		l.end(err)
		return err
	}
	l.end(fmt.Errorf("coordination: member %s resigned role %s: %w", l.member, l.role, ErrNotHeld))
	if err := errors.Join(leaseErr, registrationErr); err != nil {
		l.logger.Warn("coordination: resignation tombstone failed; standbys wait for the deadline", slog.Any("error", err))
		return wrapf(err, nil, "resign role %s", l.role)
	}
	return nil
}

// renewLoop renews at every renew interval, and at most one poll interval
// after a renewal that failed for a reason other than a fence; an attempt
// may take until the deadline of the lease it renews (renewAttemptBound).
// It returns when the leadership ends or Resign stops it.
//
// A due renewal does not wait behind a guarded write for long: it waits
// for the write slot at most preemptAfter, then cancels the guarded write
// in flight (see [Leadership.Write]) and takes the slot when the write has
// given it back. While it waits, no new guarded write takes the slot.
func (l *Leadership) renewLoop(ctx context.Context) {
	defer close(l.loopDone)
	clock := l.settings.clock
	retryAt := int64(0) // after a failure: the instant of the retry
	for {
		at := l.settings.lease.Timing(l.Lease()).RenewAt()
		if retryAt != 0 {
			at = retryAt
		}
		select {
		case <-l.stop:
			return
		case <-l.done:
			return
		case <-clock.After(time.Duration(at-clock.NowMillis()) * time.Millisecond):
		}
		attempt, cancel := withClockTimeout(ctx, clock, l.renewAttemptBound())
		err := l.lockForRenewal(attempt)
		if err == nil {
			err = l.renewHeld(attempt)
			l.unlock()
		}
		cancel()
		switch {
		case err == nil:
			retryAt = 0
		case errors.Is(err, ErrNotHeld), endsLeadership(err), errors.Is(err, ErrNotAuthorized):
			return // renewHeld ended the leadership
		default:
			select {
			case <-l.stop:
				return
			case <-l.done:
				return // the renew deadline ended it, and cancelled this attempt
			default:
			}
			l.logger.Warn("coordination: renewal failed; retrying", slog.Any("error", err),
				slog.Duration("retry_in", l.settings.pollInterval))
			retryAt = clock.NowMillis() + l.settings.pollInterval.Milliseconds()
		}
	}
}

// renewAttemptBound is how long one renewal attempt may take: until the
// deadline of the lease it renews, and at least one renew interval. An
// attempt whose transaction is still in flight at its end loses the epoch's
// producer (outcome unknown) and ends the leadership, so a bound of one
// renew interval ended healthy leaderships whose commit was only slow, as
// while the role's transaction coordinator moves: the lease stays valid,
// and no standby challenges, until its deadline. A failed attempt that
// returns early is retried as before, one poll interval later.
func (l *Leadership) renewAttemptBound() time.Duration {
	remaining := time.Duration(l.Lease().Deadline-l.settings.clock.NowMillis()) * time.Millisecond
	return max(l.settings.lease.renewInterval, remaining)
}

// preemptAfter is how long a due renewal waits for a guarded write in
// flight before it cancels it: until one renew interval before the
// deadline of the current lease, and not at all past that instant. On the
// regular schedule (a renewal due one renew interval after the grant) that
// is the lease duration minus two renew intervals: 10 s with the defaults
// (30 s, 10 s), 2 s with lease 6 s / renew 2 s, and at least one renew
// interval for a lease that follows the advice of [NewLeaseConfig] (a renew
// interval of at most a third of the lease). The renewal then still has one
// renew interval to commit before a standby may challenge. lockForRenewal
// also gives a write that has just begun half a renew interval.
//
// It waits that long, rather than a fixed half renew interval, because over
// [KafkaTransport] a write cancelled with its transaction at the broker
// still holds the epoch's turn until its transaction ends in the
// background, so the renewal gains nothing by cancelling early: on the
// 3-node cluster most writes that stall (1 to 5 s while a partition leader
// or a transaction coordinator moves) commit within the longer wait.
func (l *Leadership) preemptAfter() time.Duration {
	lease := l.Lease()
	until := time.Duration(lease.Deadline-l.settings.clock.NowMillis())*time.Millisecond - l.settings.lease.renewInterval
	return max(until, 0)
}

// lockForRenewal takes the write slot for a due renewal. It holds back new
// guarded writes while it waits, and cancels the guarded write in flight
// once it has waited preemptAfter, or gives up when ctx ends.
func (l *Leadership) lockForRenewal(ctx context.Context) error {
	select {
	case l.slot <- struct{}{}:
		return nil
	default:
	}
	gate := make(chan struct{})
	l.mu.Lock()
	l.renewGate = gate
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.renewGate = nil
		l.mu.Unlock()
		close(gate)
	}()
	wait := l.preemptAfter()
	l.mu.Lock()
	if l.preempt != nil {
		// A write that has just begun gets half a renew interval: a
		// renewal retried in the last renew interval before the deadline
		// would otherwise cancel every write at once, and over
		// KafkaTransport the cancellation of a write at the broker costs
		// the epoch's producer.
		held := time.Duration(l.settings.clock.NowMillis()-l.writeFrom) * time.Millisecond
		wait = max(wait, l.settings.lease.renewInterval/2-held)
	}
	l.mu.Unlock()
	preempt := l.settings.clock.After(wait)
	for {
		select {
		case l.slot <- struct{}{}:
			return nil
		case <-preempt:
			preempt = nil
			l.mu.Lock()
			cancel := l.preempt
			l.mu.Unlock()
			if cancel != nil {
				l.logger.Warn("coordination: a guarded write holds the role's producer past a due renewal; cancelling it to renew the lease",
					slog.Duration("waited", wait))
				cancel(errPreempted)
			}
		case <-ctx.Done():
			return fmt.Errorf("coordination: renew role %s: waiting for the write in flight: %w", l.role, ctx.Err())
		}
	}
}

// lock takes the write slot, or gives up when ctx ends first. It lets a due
// renewal that waits for the slot go first.
func (l *Leadership) lock(ctx context.Context, operation string) error {
	for {
		l.mu.Lock()
		gate := l.renewGate
		l.mu.Unlock()
		if gate == nil {
			break
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return fmt.Errorf("coordination: %s role %s: waiting for the due renewal of the lease: %w", operation, l.role, ctx.Err())
		}
	}
	select {
	case l.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("coordination: %s role %s: waiting for the write in flight: %w", operation, l.role, ctx.Err())
	}
}

// unlock gives the write slot back.
func (l *Leadership) unlock() { <-l.slot }

// endsLeadership reports whether a write error leaves the token unable to
// write again: a fence, or a lost producer (which includes a transactional
// id that the cluster no longer lets the member use). A guarded record that
// the member may not write to its topic fails its write only.
func endsLeadership(err error) bool {
	return errors.Is(err, ErrFenced) || errors.Is(err, ErrProducerLost)
}

// mayHaveCommitted reports an error of a [GuardedWriter] after which the
// records of the call may be in the log, so that they are never written
// again: a fence or a lost producer (endsLeadership), or a write of
// unknown outcome ([ErrOutcomeUnknown]).
func mayHaveCommitted(err error) bool {
	return endsLeadership(err) || errors.Is(err, ErrOutcomeUnknown)
}

// endedErr returns the error of an operation on an ended leadership, and nil
// while it holds.
func (l *Leadership) endedErr(operation string) error {
	err := l.Err()
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotHeld) {
		return wrapf(err, nil, "%s role %s", operation, l.role)
	}
	return wrapf(err, []error{ErrNotHeld}, "%s role %s", operation, l.role)
}

// end records why the leadership ended and closes Done, the first time
// only. Every write checks Err after it takes the write slot, so no write
// starts after Done closes.
func (l *Leadership) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err = err
	close(l.done)
	l.cancel(err)
}
