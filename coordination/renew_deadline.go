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
// within deadline of the grant of its newest confirmed lease: [Leadership.Done]
// closes and [Leadership.Context] is cancelled at that instant, by the
// holder's clock ([WithClock]), measured on its monotonic reading: a step
// of the wall clock (NTP, a VM restore) neither delays nor hastens it. The option is off by default. It rejects a
// deadline at or below the renew interval (a renewal could never land in
// time) or at or above the lease duration (no margin).
//
// What it guarantees. Let D be the lease duration, R the renew deadline,
// and G the GrantedAt of the newest lease record whose write the cluster
// confirmed to the holder (the holder stamps G before the write, so the
// record's deadline G + D is never later than what the standbys read). A
// standby challenges that lease no sooner than G + D by its own clock, and
// a lease record written later, confirmed or not, only moves that instant
// on. The holder's context ends at G + R by its own clock. So if, over a
// lease duration, the standby's clock reads at most S ahead of the
// holder's (skew plus drift), then between the end of the holder's context
// and the first mint of a standby that waited for the deadline lie at least
// D − R − S. Work that stops within that margin after its context ends
// never overlaps the work of such a successor. Pick R so that D − R covers
// S plus the time the work takes to stop.
//
// What it does not guarantee. A mint that deposes the holder before the
// deadline (an operator's fence, a standby that misread the lease) takes
// effect at once; the holder learns it at its next renewal, at most a
// renew interval later, and its context ends then: drain with
// [Leadership.Resign] to hand over without overlap. A process that stops
// altogether (a long GC pause, SIGSTOP, a frozen VM) between its check of
// the context and its side effect acts late, and no lease can prevent it:
// a device that must never take a deposed leader's command checks the
// token itself (the Gate of package coordination/device). Safety of the writes to Kafka never rests on this
// option: the broker fences a deposed token whatever the clocks say.
func WithRenewDeadline(deadline time.Duration) Option {
	return func(s *settings) error {
		if err := positive("WithRenewDeadline", deadline); err != nil {
			return err
		}
		s.renewDeadline = deadline
		return nil
	}
}

// renewDeadlineDue ends the leadership when no renewal was confirmed
// within the renew deadline of the grant of the newest confirmed lease. It
// runs on the scheduler of the leadership's clock (renewal_scheduler.go),
// at the deadline of the lease it last saw, and puts itself back at the
// deadline of a newer lease when a renewal was confirmed meanwhile.
func (l *Leadership) renewDeadlineDue() {
	deadline := l.settings.renewDeadline
	l.renewMu.Lock()
	if l.renewalsOver {
		l.renewMu.Unlock()
		return
	}
	lease, grantMono := l.leaseClock()
	at := addMillis(grantMono, deadline) // on the monotonic reading: a step of the wall clock never delays the end
	if monoMillis(l.settings.clock) < at {
		l.sched.schedule(l.deadlineTask, at) // a renewal was confirmed meanwhile
		l.renewMu.Unlock()
		return
	}
	l.renewMu.Unlock()
	l.end(fmt.Errorf("coordination: member %s of role %s under %s confirmed no renewal within the renew deadline %v of its lease granted at %d ms (lease deadline %d ms): %w",
		l.member, l.role, l.token, deadline, lease.GrantedAt, lease.Deadline, ErrRenewDeadline)) // and cancels a renewal in flight; none starts after Done
	l.logger().Warn("coordination: the leadership ended on its renew deadline: no renewal was confirmed in time",
		slog.Duration("renew_deadline", deadline), slog.Int64("granted_at_ms", lease.GrantedAt))
}
