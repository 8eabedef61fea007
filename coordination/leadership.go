package coordination

// The lifetime of a leadership: the Leadership handle, its start, what it
// reports (Role, Token, Lease, Done, Err, Context), and its end (Resign,
// end, and what ends it). Its owners: the renewer (leadership_renewal.go),
// the write slot (leadership_slot.go), the write queue of the guarded
// writes (leadership_write.go).

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
// The renewals of every leadership over one transport and [Clock] share one
// goroutine, and every write of the handle takes its one write slot: see the
// package doc's section "Renewals and the write slot".
//
// A Leadership is safe for concurrent use.
type Leadership struct {
	transport Transport
	extended  ExtendedTransport // the transport's extensions (extensionsOf); nil for a plain Transport
	role      Role
	member    MemberID
	partition TopicPartition
	token     FencingToken
	settings  *settings

	// Its owners, each with its own lock: the write slot that every write
	// takes (leadership_slot.go), the renewer (leadership_renewal.go), the
	// write queue of the guarded writes (leadership_write.go).
	slot    writeSlot
	renewer renewer
	writes  writeQueue

	mu  sync.Mutex // guards err, ctx and cancel
	err error

	done        chan struct{} // closed by end, once
	release     func()        // releases the campaign's claim (campaign_claims.go); called by end before it closes done
	heartbeated bool          // the campaign wrote a heartbeat, whose tombstone Resign writes too

	ctx    context.Context         // Context(), built at its first call (under mu): cancelled by end, with its error as the cause
	cancel context.CancelCauseFunc // cancels ctx; nil until ctx is built
}

// startLeadership builds the handle after the first lease write and starts
// its renewals; leaseMono is the monotonic instant of the lease's grant.
func startLeadership(c *campaign, lease Lease, leaseMono int64) *Leadership {
	l := &Leadership{
		transport: c.transport,
		extended:  c.extended,
		role:      c.role,
		member:    c.member,
		partition: c.partition,
		token:     lease.Token,
		settings:  c.settings,
		done:      make(chan struct{}),

		heartbeated: c.heartbeated,
		release:     c.release,
	}
	l.writes.l = l
	c.release = nil                      // the leadership holds the campaign's claim until it ends
	l.renewer.start(l, lease, leaseMono) // leadership_renewal.go
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
	lease, _ := l.renewer.leaseClock()
	return lease
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

// Context returns a context that is cancelled when the leadership ends, for
// any reason that [Leadership.Done] names, with [Leadership.Err] as its
// cause ([context.Cause]); its Err is [context.Canceled]. Pass it to the
// work of the role, so that the work stops when the leadership does:
//
//	leader, err := coordination.AcquireLeadership(ctx, transport, role, me)
//	...
//	work(leader.Context(), leader) // returns when the leadership ends
//
// It is the same context on every call, it carries no deadline and no
// value, and it does not end with the context of [AcquireLeadership]: join
// it with a context of your own ([context.AfterFunc]) to stop at the
// earlier of the two. An [Elector] hands OnStartedLeading such a join.
//
// The context learns of a fence when the leadership does, at the next
// renewal or guarded write; with [WithRenewDeadline] it also ends on the
// holder's own lease clock. It is safe for concurrent use.
func (l *Leadership) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		// Built at the first call, so that a process that holds many
		// roles and never asks pays nothing for it.
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.err != nil {
			l.cancel(l.err)
		}
	}
	return l.ctx
}

// logger returns the logger of the leadership's records: the options'
// logger, with the role, the member, the partition and the token. It is
// built when a record is logged, which is rare, so that a process that
// holds many roles keeps no logger for each.
func (l *Leadership) logger() *slog.Logger {
	return l.settings.logger.With(slog.String("role", l.role.String()), slog.String("member", l.member.String()),
		slog.String("partition", l.partition.String()), slog.String("token", l.token.String()))
}

// Resign gives the role up. It stops the renewal loop and writes a tombstone
// on the lease key, so the first standby challenges at once instead of at
// the deadline. It also deregisters the member (a tombstone on its
// registration key). It ends the leadership, whatever the writes do, and it
// returns their error.
//
// Resign returns within its context plus the transport's bound on a write
// in flight (250 ms for [KafkaTransport]), or within a second when ctx had
// already ended: it still writes the tombstones then. Whatever ctx, it waits
// no longer than the deadline of the newest lease (at least 600 ms), plus
// 600 ms for the registration tombstone and the transport's bounds: about
// 1.7 s past that deadline with [context.Background]. Resign is safe to call
// twice and concurrently with [Leadership.Renew] and [Leadership.Write]: a
// second call writes nothing, and returns nil when a resignation ended the
// leadership, or an error that wraps [ErrNotHeld] and the cause when
// something else did, such as [ErrFenced] for a fence. The tombstones, and a
// context that ends first: see the package doc's section "Renewals and the
// write slot".
//
// Resign takes no epoch back. The member keeps the epoch it minted until
// another member mints a newer one, and the broker still accepts a write of
// the resigned member until then. A caller that resigns stops its own
// guarded writes.
func (l *Leadership) Resign(ctx context.Context) error {
	l.renewer.stop()
	defer l.renewer.wait()

	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cleanupBound)
		defer cancel()
	}
	caller := ctx
	ctx, cancel := l.resignBound(caller)
	defer cancel()
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
	leaseErr, registrationErr := l.writeTombstones(ctx, caller)
	if leaseErr != nil && errors.Is(leaseErr, ErrFenced) {
		err := fmt.Errorf("coordination: resignation of role %s by %s under %s: %w", l.role, l.member, l.token, leaseErr)
		l.end(err)
		return err
	}
	l.end(fmt.Errorf("coordination: member %s resigned role %s: %w", l.member, l.role, ErrNotHeld))
	if err := errors.Join(leaseErr, registrationErr); err != nil {
		l.logger().Warn("coordination: resignation tombstone failed; standbys wait for the deadline", slog.Any("error", err))
		return wrapf(err, nil, "resign role %s", l.role)
	}
	return nil
}

// writeTombstones writes the tombstones of a resignation: the lease's, the
// member's registration's, and its heartbeat's when the campaign wrote one.
// Over an [ExtendedTransport] they go in one transaction under the token, so a
// standby folds the resignation whole at its commit; when that transaction
// does not commit, the registration tombstone (and the heartbeat's) goes
// again as a plain append, which carries no authority and needs no epoch.
// Otherwise the lease tombstone goes through [LeaseWriter.WriteLease] and
// the others through [Registrar.Append], all at once, so that the call
// returns within its context plus one abandonGrace of the transport, not
// two. It returns the error of the lease tombstone and the error of the
// registration tombstone; a failed heartbeat tombstone is only logged.
// ctx is Resign's bound (resignBound) of caller's context: when it ended
// before the transaction did, the plain appends get cleanupBound more
// within caller's context.
func (l *Leadership) writeTombstones(ctx, caller context.Context) (leaseErr, registrationErr error) {
	leaseKey := EncodeKey(LeaseKey(l.role))
	registrationKey := EncodeKey(RegistrationKey(l.role, l.member))
	var heartbeatKey []byte
	if l.heartbeated {
		// Hygiene only: a heartbeat without a registration counts for
		// nothing, but compaction keeps it until a tombstone replaces it.
		heartbeatKey = EncodeKey(HeartbeatKey(l.role, l.member))
	}
	if l.extended != nil {
		keys := [][]byte{leaseKey, registrationKey}
		if heartbeatKey != nil {
			keys = append(keys, heartbeatKey)
		}
		leaseErr = l.extended.WriteTombstones(ctx, l.partition, l.token, keys...)
		if leaseErr == nil {
			return nil, nil
		}
		if ctx.Err() != nil && caller.Err() == nil {
			// The deadline of the lease passed with the transaction in
			// flight (behind a renewal whose answer never came): the
			// registration tombstone still deregisters the member.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(caller, cleanupBound)
			defer cancel()
		}
	}
	var appends sync.WaitGroup
	appends.Go(func() {
		registrationErr = l.transport.Append(ctx, l.partition, registrationKey, nil)
	})
	if heartbeatKey != nil {
		appends.Go(func() {
			if err := l.transport.Append(ctx, l.partition, heartbeatKey, nil); err != nil {
				l.logger().Warn("coordination: the tombstone of the heartbeat failed; it counts for nothing without a registration", slog.Any("error", err))
			}
		})
	}
	if l.extended == nil {
		leaseErr = l.transport.WriteLease(ctx, l.partition, l.token, leaseKey, nil)
	}
	appends.Wait()
	return leaseErr, registrationErr
}

// resignBound bounds Resign's wait for the write slot and its tombstones:
// ctx, and at the latest the deadline of the newest lease on the clock's
// monotonic reading, or cleanupBound from now when that is sooner. Past
// the deadline a standby challenges without the lease tombstone, and the
// epoch's transaction in flight (a renewal or a guarded write without an
// answer) may hold the producer until the transaction timeout and beyond.
func (l *Leadership) resignBound(ctx context.Context) (context.Context, context.CancelFunc) {
	lease, grantMono := l.renewer.leaseClock()
	clock := l.settings.clock
	until := time.Duration(monoAt(lease, grantMono, lease.Deadline)-monoMillis(clock)) * time.Millisecond
	return withClockTimeout(ctx, clock, max(until, cleanupBound))
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
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = err
	if l.release != nil {
		l.release() // a campaign of the member may start once Done closes
	}
	close(l.done)
	if l.cancel != nil {
		l.cancel(err)
	}
	l.mu.Unlock()
	l.renewer.stop() // and cancels a renewal in flight: none starts after Done
}

// endsLeadership reports whether a write error leaves the token unable to
// write again: a fence, or a lost producer (which includes a transactional
// id that the cluster no longer lets the member use). A guarded record that
// the member may not write to its topic fails its write only.
func endsLeadership(err error) bool {
	return errors.Is(err, ErrFenced) || errors.Is(err, ErrProducerLost)
}
