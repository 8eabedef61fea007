package coordination

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrRenewDeadline reports a leadership that ended on its own lease clock:
// the holder confirmed no renewal within the renew deadline that
// [WithRenewDeadline] set. Nobody need hold the role, and the token may
// still write; the leadership ends so that work with side effects that
// Kafka does not fence stops before a standby may take over. Compete again
// with [AcquireLeadership] (an [Elector] does): the lease still names the
// member, so it takes the role back at once, under a new epoch, when no
// standby took it.
var ErrRenewDeadline = errors.New("no renewal confirmed within the renew deadline")

// WithRenewDeadline bounds a leadership by its own lease clock, for work
// whose side effects Kafka does not fence: a call to a device that reads no
// token, a file, a payment. It is what client-go's RenewDeadline gives. The
// leadership that [AcquireLeadership] returns then also ends, with an error
// that wraps [ErrRenewDeadline], when the holder has confirmed no renewal
// within deadline of the grant of its newest confirmed lease:
// [Leadership.Done] closes and [Leadership.Context] is cancelled at that
// instant, by the holder's clock ([WithClock]), measured on its monotonic
// reading: a step of the wall clock (NTP, a VM restore) neither delays nor
// hastens it. The option is off by default (see "Extensions and errata").
// It rejects a deadline at or below the renew interval (a renewal could
// never land in time) or at or above the lease duration (no margin).
//
// Work that stops within D − R − S after its context ends (lease duration,
// renew deadline, clock skew) never overlaps a successor that waited for
// the deadline; a mint before the deadline and a stopped process are not
// covered. Safety of the writes to Kafka never rests on this option. The
// proof and its limits: see the package doc's section "What the renew
// deadline guarantees".
func WithRenewDeadline(deadline time.Duration) Option {
	return func(s *settings) error {
		if err := positive("WithRenewDeadline", deadline); err != nil {
			return err
		}
		s.renewDeadline = deadline
		return nil
	}
}

// deadlineDue ends the leadership when no renewal was confirmed within
// the renew deadline of the grant of the newest confirmed lease. It runs on
// the scheduler of the leadership's clock (renewal_scheduler.go), at the
// deadline of the lease it last saw, and puts itself back at the deadline
// of a newer lease when a renewal was confirmed meanwhile. A pause of the
// renewals does not stop it.
func (r *renewer) deadlineDue() {
	l := r.l
	deadline := l.settings.renewDeadline
	r.mu.Lock()
	if r.over {
		r.mu.Unlock()
		return
	}
	lease, grantMono := r.lease, r.leaseMono
	at := addMillis(grantMono, deadline) // on the monotonic reading: a step of the wall clock never delays the end
	if monoMillis(l.settings.clock) < at {
		r.sched.schedule(r.deadlineTask, at) // a renewal was confirmed meanwhile
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	l.end(fmt.Errorf("coordination: member %s of role %s under %s confirmed no renewal within the renew deadline %v of its lease granted at %d ms (lease deadline %d ms): %w",
		l.member, l.role, l.token, deadline, lease.GrantedAt, lease.Deadline, ErrRenewDeadline)) // and cancels a renewal in flight; none starts after Done
	l.logger().Warn("coordination: the leadership ended on its renew deadline: no renewal was confirmed in time",
		slog.Duration("renew_deadline", deadline), slog.Int64("granted_at_ms", lease.GrantedAt))
}
