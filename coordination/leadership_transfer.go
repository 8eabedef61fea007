package coordination

// A planned transfer of a role: Leadership.TransferTo, its typed error,
// its bound (WithTransferTimeout), and the Elector's successor chooser
// (WithSuccessor). The rule by which the named member recognises the offer
// is offeredTo in campaign_rules.go; the package doc's section "Planned
// transfer" explains the mechanism.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrTransferred reports a leadership that ended because its holder handed
// the role to another member with [Leadership.TransferTo]: the named
// member wrote its own lease under a newer epoch. [Leadership.Err] wraps it,
// and [ErrNotHeld] too, after a successful transfer.
var ErrTransferred = errors.New("the role was transferred to another member")

// TransferFault is what went wrong with a [Leadership.TransferTo]: the
// comparable part of a [TransferError].
type TransferFault int

const (
	// TransferNotMember: the named member is not in the role's roster.
	TransferNotMember TransferFault = iota + 1
	// TransferToSelf: the named member is the holder itself.
	TransferToSelf
	// TransferMemberDead: the named member is known dead: with heartbeats
	// on ([WithHeartbeatInterval]), its rank lapsed.
	TransferMemberDead
	// TransferBusy: another transfer of the same leadership is in progress.
	TransferBusy
	// TransferNotTaken: the named member did not take the role within the
	// bound ([WithTransferTimeout]), or the call's context ended first.
	TransferNotTaken
)

// String names the fault, as its constant without the Transfer prefix.
func (f TransferFault) String() string {
	switch f {
	case TransferNotMember:
		return "not a member"
	case TransferToSelf:
		return "to self"
	case TransferMemberDead:
		return "member dead"
	case TransferBusy:
		return "busy"
	case TransferNotTaken:
		return "not taken"
	}
	return fmt.Sprintf("TransferFault(%d)", int(f))
}

// TransferError reports a [Leadership.TransferTo] that did not hand the
// role over. The holder keeps the role unless [Leadership.Err] says
// otherwise (a fence during the transfer ends it). Find it with
// [errors.As] and compare its Fault.
type TransferError struct {
	Role   Role
	Holder MemberID      // the member that holds the role and asked for the transfer
	To     MemberID      // the named member
	Fault  TransferFault // what went wrong
	Reason string        // what went wrong, in words
	Err    error         // the underlying error (a context's, a transport's), or nil
}

// Error writes "coordination: transfer of role <role> from <holder> to
// <to>: <fault>: <reason>[: <err>]".
func (e *TransferError) Error() string {
	msg := fmt.Sprintf("coordination: transfer of role %s from %s to %s: %s: %s", e.Role, e.Holder, e.To, e.Fault, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Err.
func (e *TransferError) Unwrap() error { return e.Err }

// WithTransferTimeout sets how long [Leadership.TransferTo] waits for the
// named member to take the role before it takes the role back. The
// default is max(3 × challenge stagger, renew interval + 2 × poll
// interval): 15 s with the specification's defaults (5 s, 10 s, 1 s),
// capped at the lease duration minus the renew interval. It rejects an
// extent ≤ 0, or one not below the lease duration (the offer's lease would
// lapse first), with an error that wraps [ErrMisconfigured].
func WithTransferTimeout(timeout time.Duration) Option {
	return func(s *settings) error {
		if timeout <= 0 {
			return fmt.Errorf("coordination: WithTransferTimeout(%v): want an extent above zero: %w", timeout, ErrMisconfigured)
		}
		s.transferTimeout = timeout
		return nil
	}
}

// WithSuccessor makes an [Elector] hand the role, when Run's context ends
// while it leads, to the member that choose names ([Leadership.TransferTo])
// instead of resigning to whoever ranks first. choose gets the roster of
// the role (rank order, the holder included) and returns a member of it;
// "" resigns as before, and so does a transfer that fails. It is called on
// Run's goroutine. Only the Elector reads it; [AcquireLeadership] ignores
// it. It rejects a nil func.
func WithSuccessor(choose func(roster []RosterEntry) MemberID) Option {
	return func(s *settings) error {
		if choose == nil {
			return errors.New("coordination: WithSuccessor(nil): want a func")
		}
		s.successor = &choose
		return nil
	}
}

// transferTimeout returns the bound of a transfer under s.
func (s *settings) transferBound() time.Duration {
	if s.transferTimeout > 0 {
		return s.transferTimeout
	}
	return defaultTransferTimeout(s.lease, s.pollInterval)
}

// defaultTransferTimeout is WithTransferTimeout's default.
func defaultTransferTimeout(lease LeaseConfig, poll time.Duration) time.Duration {
	bound := max(3*lease.challengeStagger, lease.renewInterval+2*poll)
	return min(bound, lease.duration-lease.renewInterval)
}

// TransferTo hands the role to the member to, which must be in the role's
// roster and competing for it ([AcquireLeadership] or an [Elector]). The
// holder pauses its renewals and writes a lease that names to under its own
// token (an offer); to recognises it, mints at once (which fences this
// holder) and writes its own lease; the other standbys see a live lease and
// wait. TransferTo returns nil once to's lease is on the partition; the
// leadership then ends with [ErrTransferred] and withdraws its registration.
// Guarded writes go on meanwhile (fenced once to mints); Renew waits.
//
// It returns a [*TransferError] at once, and the holder keeps the role,
// for to not in the roster, to the holder, to known dead, or a transfer
// in progress; after the bound ([WithTransferTimeout]) or the end of ctx,
// with the holder's own lease written again (no epoch used) and the
// renewals resumed; and when the leadership ends meanwhile (Resign, the
// renew deadline). The package doc's section "Planned transfer" says more,
// and why writes go on. Safe for concurrent use.
func (l *Leadership) TransferTo(ctx context.Context, to MemberID) error {
	fail := func(fault TransferFault, err error, format string, args ...any) error {
		return &TransferError{Role: l.role, Holder: l.member, To: to, Fault: fault, Reason: fmt.Sprintf(format, args...), Err: err}
	}
	switch {
	case to.IsZero():
		return fail(TransferNotMember, nil, "the zero MemberID names no member: build it with NewMemberID")
	case to == l.member:
		return fail(TransferToSelf, nil, "the member holds the role already")
	}
	over := make(chan struct{})
	if _, busy := transfers.LoadOrStore(l, over); busy {
		return fail(TransferBusy, nil, "another transfer of this leadership is in progress")
	}
	defer func() {
		transfers.Delete(l)
		close(over) // a Renew that waits for the transfer goes on
	}()
	if err := l.endedErr("transfer"); err != nil {
		return err
	}
	reader := newTransferReader(l)
	defer reader.close()
	state, err := reader.read(ctx)
	if err != nil {
		return fail(TransferNotTaken, err, "reading the roster of %s failed; nothing was written", l.partition)
	}
	entry, ok := state.Entry(to)
	if now := l.settings.clock.NowMillis(); !ok || entry.LapsedAt(now, l.settings.lease) {
		// A refusal reads the partition itself: a follower's view may lag
		// a registration or a heartbeat that was just committed.
		if state, err = reader.readAll(ctx); err != nil {
			return fail(TransferNotTaken, err, "reading the roster of %s failed; nothing was written", l.partition)
		}
		entry, ok = state.Entry(to)
	}
	if !ok {
		return fail(TransferNotMember, nil, "%s is not in the roster of the role (%d members): it must compete for the role (AcquireLeadership, an Elector) to take it", to, len(state.Roster))
	}
	if now := l.settings.clock.NowMillis(); entry.LapsedAt(now, l.settings.lease) {
		return fail(TransferMemberDead, nil, "its newest heartbeat is %d ms old, past the roster lapse of %v", now-entry.LastSeen, l.settings.lease.RosterLapse())
	}
	// No renewal goes out while the offer stands: the pause takes the due
	// renewal off the scheduler, and a renewal that takes the write slot
	// after it writes nothing. The slot is held for the offer's own write
	// only, so that a renewal in flight lands before the offer, not after.
	// A transfer that ends without a successor resumes the renewals (after
	// the take-back, by the defers' order); after a success, or an end of
	// the leadership, the resume does nothing.
	l.renewer.pause()
	defer l.renewer.resume()
	bound := l.settings.transferBound()
	wait, cancel := withClockTimeout(ctx, l.settings.clock, bound)
	defer cancel()
	if err := l.lock(wait, "transfer"); err != nil {
		return fail(TransferNotTaken, err, "waiting for the write slot; nothing was written")
	}
	if err := l.endedErr("transfer"); err != nil {
		l.unlock()
		return err
	}
	offer := l.settings.lease.Grant(to, l.token, l.settings.clock.NowMillis())
	err = l.transport.WriteLease(ctx, l.partition, l.token, EncodeKey(LeaseKey(l.role)), EncodeLease(offer))
	l.unlock()
	if err != nil {
		err = wrapf(err, nil, "offer by member %s", l.member)
		if endsLeadership(err) || errors.Is(err, ErrNotAuthorized) {
			l.end(err)
			return fail(TransferNotTaken, err, "the offer was refused, and the leadership ended")
		}
		back := l.takeBack(ctx)
		return fail(TransferNotTaken, errors.Join(err, back), "the offer's write failed (it may have landed): %s", tookBack(back))
	}
	for {
		state, err := reader.read(ctx)
		// A lease under another token than the holder's comes of a newer
		// mint: an older producer can no longer write once the offer
		// landed. (Supersedes would miss a producer id that the
		// coordinator reallocated after an exhausted epoch.)
		newer := err == nil && state.Lease != nil && state.Lease.Token != l.token
		if newer && state.Lease.Member == to {
			// A guarded write fenced by to's mint may have ended the
			// leadership first (ErrFenced); end keeps that cause.
			l.end(&contextError{msg: fmt.Sprintf("coordination: member %s transferred role %s to %s, which holds it under %s: %s: %s",
				l.member, l.role, to, state.Lease.Token, ErrTransferred.Error(), ErrNotHeld.Error()), errs: []error{ErrTransferred, ErrNotHeld}})
			l.withdrawRegistration(ctx)
			return nil
		}
		if newer {
			// Another member minted: the take-back is fenced, and ends the
			// leadership.
			return fail(TransferNotTaken, l.takeBack(ctx), "%s took the role under %s instead", state.Lease.Member, state.Lease.Token)
		}
		if ended := l.Err(); ended != nil && !errors.Is(ended, ErrFenced) {
			// Resign, the renew deadline, a lost producer: nothing to take
			// back. (A fence is to's mint, most likely: its lease may come.)
			return fail(TransferNotTaken, l.endedErr("transfer"), "the leadership ended during the transfer")
		}
		if wait.Err() != nil {
			break
		}
		var ended <-chan struct{}
		if l.Err() == nil {
			ended = l.done // else fenced: wait for to's lease
		}
		reader.wait(wait, ended) // then one more read, at the bound too
	}
	back := l.takeBack(ctx)
	if ctx.Err() != nil {
		return fail(TransferNotTaken, errors.Join(ctx.Err(), back), "the call's context ended: %s", tookBack(back))
	}
	return fail(TransferNotTaken, back, "%s did not take the role within %v: %s", to, bound, tookBack(back))
}

// awaitTransfer holds the caller back while a TransferTo of l runs, or
// until ctx ends: Renew waits so, because its lease would write over the
// offer (and withdraw it). The caller holds the write slot, and gives it
// back while it waits; it reports whether it waited, and then takes the
// slot again.
func (l *Leadership) awaitTransfer(ctx context.Context) (waited bool, err error) {
	running, ok := transfers.Load(l)
	if !ok {
		return false, nil
	}
	l.unlock()
	select {
	case <-running.(chan struct{}):
	case <-ctx.Done():
		return true, fmt.Errorf("coordination: renew role %s: waiting for the transfer of the role: %w", l.role, ctx.Err())
	}
	return true, l.lock(ctx, "renew")
}

// tookBack says in words how the take-back after a transfer that did not
// happen went.
func tookBack(err error) string {
	switch {
	case err == nil:
		return "the holder wrote its own lease again and keeps the role, no epoch used"
	case errors.Is(err, ErrFenced):
		return "the holder's own lease was fenced (the member minted meanwhile), and the leadership ended"
	}
	return "the holder's own lease did not land; its renewals retry it"
}

// transfers holds the leaderships whose TransferTo runs (TransferBusy),
// each with a channel closed at the call's end (awaitTransfer): an entry
// lives for the call only.
var transfers sync.Map

// takeBack writes the holder's own lease again after a transfer that did
// not happen, under a context of its own (the call's may have ended),
// bounded as a renewal is, the wait for the write slot included (a
// guarded write may hold it). A target that minted meanwhile fences it,
// which ends the leadership. It is a renewal: a retry of a renewal that
// failed before the transfer is void after it, so that the renewals go on
// one renew interval after the take-back; a take-back that fails is
// retried as a failed renewal is, one poll interval later (the offer
// stands meanwhile).
func (l *Leadership) takeBack(ctx context.Context) error {
	back, cancel := withClockTimeout(context.WithoutCancel(ctx), l.settings.clock, l.renewer.attemptBound())
	defer cancel()
	err := l.lock(back, "take back")
	if err == nil {
		err = l.renewer.renew(back)
		l.unlock()
	}
	retryAt := int64(0)
	if err != nil {
		retryAt = monoMillis(l.settings.clock) + l.settings.pollInterval.Milliseconds()
	}
	l.renewer.mu.Lock()
	l.renewer.retryAt = retryAt
	l.renewer.mu.Unlock()
	if err != nil {
		return wrapf(err, nil, "take role %s back after the transfer", l.role)
	}
	return nil
}

// withdrawRegistration writes the tombstones of the holder's registration
// (and heartbeat) after a transfer, as a resignation does, so that the
// member leaves the roster; a failure is only logged: the registration
// then ranks as a standby that does not compete.
func (l *Leadership) withdrawRegistration(ctx context.Context) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cleanupBound)
		defer cancel()
	}
	keys := [][]byte{EncodeKey(RegistrationKey(l.role, l.member))}
	if l.heartbeated {
		keys = append(keys, EncodeKey(HeartbeatKey(l.role, l.member)))
	}
	for _, key := range keys {
		if err := l.transport.Append(ctx, l.partition, key, nil); err != nil {
			l.logger().Warn("coordination: after the transfer, the tombstone of the registration failed", slog.Any("error", err))
		}
	}
}

// transferReader reads the role's state for a transfer: incrementally
// through the transport's follower, woken by its new records, or the whole
// partition every poll interval.
type transferReader struct {
	l        *Leadership
	follower partitionFollower
	changed  <-chan struct{}
	stop     func()
	builder  *RoleStateBuilder
	next     int64
}

func newTransferReader(l *Leadership) *transferReader {
	r := &transferReader{l: l, builder: NewRoleStateBuilder(l.role), stop: func() {}}
	if follower := followerOfRole(l.extended, l.partition, l.role); follower != nil {
		r.follower = follower
		r.changed, r.stop = follower.WatchPartition(l.partition)
	}
	return r
}

func (r *transferReader) close() { r.stop() }

// read returns the role's state now.
func (r *transferReader) read(ctx context.Context) (RoleState, error) {
	var records []StateRecord
	var err error
	if r.follower != nil {
		records, r.next, err = r.follower.ReadPartitionFrom(ctx, r.l.partition, r.next)
	} else {
		r.builder = NewRoleStateBuilder(r.l.role)
		records, err = r.l.transport.ReadPartition(ctx, r.l.partition)
	}
	if err != nil {
		return RoleState{}, wrapf(err, nil, "read %s for role %s", r.l.partition, r.l.role)
	}
	for _, record := range records {
		_ = r.builder.Apply(record) // a record that does not decode: the campaigns log it
	}
	return r.builder.Build(), nil
}

// readAll returns the role's state from a read of the whole partition, to
// its last stable offset, whatever the follower's view holds.
func (r *transferReader) readAll(ctx context.Context) (RoleState, error) {
	records, err := r.l.transport.ReadPartition(ctx, r.l.partition)
	if err != nil {
		return RoleState{}, wrapf(err, nil, "read %s for role %s", r.l.partition, r.l.role)
	}
	builder := NewRoleStateBuilder(r.l.role)
	for _, record := range records {
		_ = builder.Apply(record)
	}
	return builder.Build(), nil
}

// wait returns on a new record of the partition, after one poll interval,
// when ctx ends, or when ended closes.
func (r *transferReader) wait(ctx context.Context, ended <-chan struct{}) {
	select {
	case <-r.changed: // nil without a follower
	case <-r.l.settings.clock.After(r.l.settings.pollInterval):
	case <-ctx.Done():
	case <-ended:
	}
}

// leaseHistory is what a campaign's fold keeps of the role's lease key
// beyond [RoleState]: the newest lease record and the one before it, so
// that the rules can tell a holder's offer (the newest names this member
// under the token of a lease that named the holder) from a lease of the
// member's own (offeredTo). Records come in offset order; a tombstone
// counts as a lease of nobody.
type leaseHistory struct {
	key            []byte // the encoded lease key of the role, set at the first record
	newest, prior  *Lease
	newestOffset   int64
	newestAssigned bool
}

// apply folds one record of the role's partition.
func (h *leaseHistory) apply(role Role, record StateRecord) {
	if h.key == nil {
		h.key = EncodeKey(LeaseKey(role))
	}
	if !bytes.Equal(record.Key, h.key) || (h.newestAssigned && record.Offset <= h.newestOffset) {
		return
	}
	var lease *Lease
	if !IsTombstone(record.Value) {
		decoded, err := DecodeLease(record.Value)
		if err != nil {
			return // the fold reports it
		}
		lease = &decoded
	}
	h.prior, h.newest, h.newestOffset, h.newestAssigned = h.newest, lease, record.Offset, true
}

// priorOf returns the lease before the newest one when the newest is
// lease, and nil otherwise.
func (h *leaseHistory) priorOf(lease Lease) *Lease {
	if h.newest == nil || *h.newest != lease || h.prior == nil {
		return nil
	}
	prior := *h.prior
	return &prior
}

// handOver transfers the leadership of a Run whose context ended to the
// member that WithSuccessor's func chooses from the roster, and reports
// whether it did; false (no chooser, "" chosen, the roster unreadable, a
// failed transfer) leaves the resignation to the caller. The transfer
// runs under a context of its own, bounded by the transfer's bound.
func (e *Elector) handOver(ctx context.Context, leader *Leadership) bool {
	choose := e.settings.successor
	if choose == nil || leader.Err() != nil {
		return false
	}
	ctx = context.WithoutCancel(ctx)
	read, cancel := withClockTimeout(ctx, e.settings.clock, electorResignBound)
	state, err := DescribeRoleState(read, e.transport, e.role, e.options...)
	cancel()
	if err != nil {
		e.logger.Warn("coordination: the elector could not read the roster to choose a successor; resigning instead", slog.Any("error", err))
		return false
	}
	to := (*choose)(state.Roster)
	if to.IsZero() {
		return false
	}
	if err := leader.TransferTo(ctx, to); err != nil {
		e.logger.Warn("coordination: the transfer to the chosen successor failed; resigning instead", slog.String("successor", to.String()), slog.Any("error", err))
		return false
	}
	e.logger.Info("coordination: the elector handed the role to its successor", slog.String("successor", to.String()))
	return true
}
