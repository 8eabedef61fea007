package coordination

// A planned transfer of a role: Leadership.TransferTo, its typed error,
// its bound (WithTransferTimeout), and the Elector's successor chooser
// (WithSuccessor). The rule by which the named member recognises the offer
// is offeredTo in campaign_rules.go; the package doc's section "Planned
// transfer" explains the mechanism.

import (
	"context"
	"errors"
	"fmt"
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
// holder writes a lease that names to under its own token (an offer), and
// stops renewing; the member recognises it, mints at once (which fences
// this holder) and writes its own lease; the other standbys see a live
// lease and do not challenge. TransferTo returns nil once to's lease is on
// the partition, and the leadership then ends with [ErrTransferred] and
// withdraws its registration. Guarded writes wait for the transfer's end.
//
// It returns a [*TransferError] at once, and the holder keeps the role,
// for to not in the roster, to the holder, to known dead, or a transfer
// already in progress; and after the bound ([WithTransferTimeout]) or the
// end of ctx, with the holder's own lease written again (no epoch used).
// See the package doc's section "Planned transfer". Safe for concurrent use.
func (l *Leadership) TransferTo(ctx context.Context, to MemberID) error {
	return &TransferError{Role: l.role, Holder: l.member, To: to, Fault: TransferNotTaken, Reason: "not implemented yet"}
}
