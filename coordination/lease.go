package coordination

import (
	"fmt"
	"math"
	"time"
)

const (
	// DefaultLeaseDuration is the default extent of a lease.
	DefaultLeaseDuration = 30 * time.Second

	// DefaultRenewInterval is the default gap between two renewals by the
	// holder.
	DefaultRenewInterval = 10 * time.Second

	// DefaultChallengeStagger is the default extra delay that one rank of
	// succession adds.
	DefaultChallengeStagger = 5 * time.Second

	// RosterLapseHeartbeats is how many heartbeat intervals a standby may
	// miss before its rank lapses: [LeaseConfig.RosterLapse] is this many
	// times [LeaseConfig.HeartbeatInterval]. It applies only with
	// heartbeats on (an extension, off by default: see [WithHeartbeatInterval]).
	RosterLapseHeartbeats = 3
)

// LeaseConfig holds the three timings of one role. The timings are
// independent of the record layout, so one process holds several roles with
// different timings. It also holds two extensions that [Evaluate] reads,
// heartbeats ([LeaseConfig.WithHeartbeatInterval]) and the resignation
// anchor ([LeaseConfig.WithResignationAnchor]), both off in every config
// that [NewLeaseConfig] and [DefaultLeaseConfig] build.
//
// The lease adds no safety. It decides when a standby challenges a quiet
// holder, and nothing else. A wrong timing makes a failover early or late. A
// wrong timing never makes two members authoritative.
//
// Build a value with [NewLeaseConfig] or take [DefaultLeaseConfig]. The zero
// LeaseConfig is not a policy: every option and constructor of this package
// that takes one rejects it. A LeaseConfig is an immutable value, safe to
// share between goroutines.
type LeaseConfig struct {
	duration         time.Duration
	renewInterval    time.Duration
	challengeStagger time.Duration
	heartbeat        time.Duration // 0: no heartbeats, no roster lapse (the specification)
	resignAnchor     bool          // anchor the stagger on a resignation's tombstone
}

// DefaultLeaseConfig returns the config of [DefaultLeaseDuration],
// [DefaultRenewInterval], and [DefaultChallengeStagger].
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{
		duration:         DefaultLeaseDuration,
		renewInterval:    DefaultRenewInterval,
		challengeStagger: DefaultChallengeStagger,
	}
}

// NewLeaseConfig builds a lease policy from three extents. It rejects an
// extent at or below zero, and it rejects a renew interval at or above the
// lease duration, because the holder then never renews in time. The error
// names the extent that is wrong. An extent below one millisecond is
// accepted: the instants of a record are whole milliseconds, and the
// package rounds every extent up to the next one when it adds it to an
// instant ([LeaseConfig.Grant], [LeaseTiming.ChallengeAt]).
//
// A caller should set renewInterval to at most a third of duration. The
// holder then keeps two more attempts before the deadline. This constructor
// accepts a larger value. Ask [LeaseConfig.RenewsWithMargin] which side of
// that bound a value is on.
func NewLeaseConfig(duration, renewInterval, challengeStagger time.Duration) (LeaseConfig, error) {
	for _, extent := range []struct {
		name  string
		value time.Duration
	}{
		{"lease duration", duration},
		{"renew interval", renewInterval},
		{"challenge stagger", challengeStagger},
	} {
		if extent.value <= 0 {
			return LeaseConfig{}, fmt.Errorf("coordination: invalid %s %v: want above zero", extent.name, extent.value)
		}
	}
	if renewInterval >= duration {
		return LeaseConfig{}, fmt.Errorf("coordination: invalid renew interval %v: want below the lease duration %v, or the holder never renews in time", renewInterval, duration)
	}
	return LeaseConfig{duration: duration, renewInterval: renewInterval, challengeStagger: challengeStagger}, nil
}

// Duration returns the extent of a lease that a member takes now.
func (c LeaseConfig) Duration() time.Duration { return c.duration }

// RenewInterval returns the gap between two renewals by the holder.
func (c LeaseConfig) RenewInterval() time.Duration { return c.renewInterval }

// ChallengeStagger returns the extra delay that one rank of succession adds.
func (c LeaseConfig) ChallengeStagger() time.Duration { return c.challengeStagger }

// HeartbeatInterval returns the gap between two heartbeats of a member that
// waits for the role (see [Heartbeat]), and zero when heartbeats are off,
// as they are in the specification and in every config that
// [NewLeaseConfig] and [DefaultLeaseConfig] build.
func (c LeaseConfig) HeartbeatInterval() time.Duration { return c.heartbeat }

// RosterLapse returns how long a standby that heartbeats may stay unseen
// before its rank lapses: [RosterLapseHeartbeats] heartbeat intervals, and
// zero (no lapse) when heartbeats are off. Every member of a role should
// use one heartbeat interval, as they use one challenge stagger: a member
// that judges another lapsed earlier than the others do may challenge out
// of turn, which costs an epoch and never safety.
func (c LeaseConfig) RosterLapse() time.Duration {
	return RosterLapseHeartbeats * c.heartbeat
}

// WithHeartbeatInterval returns a copy of the config with heartbeats on, at
// this interval: an extension of the specification (see the package doc,
// "Extensions and errata"). A member that waits writes a [Heartbeat]
// record (kind 2) every interval, and [Evaluate] and [RoleState.RankAt]
// leave out a standby whose heartbeats stopped for [LeaseConfig.RosterLapse].
// An entry that never heartbeated never lapses, so a member that does not
// heartbeat (another port, an older release) keeps the specification's
// rank. It rejects an interval below one millisecond, the resolution of a
// record.
func (c LeaseConfig) WithHeartbeatInterval(interval time.Duration) (LeaseConfig, error) {
	if interval < time.Millisecond {
		return LeaseConfig{}, fmt.Errorf("coordination: invalid heartbeat interval %v: want at least 1ms, the resolution of a heartbeat record", interval)
	}
	c.heartbeat = interval
	return c, nil
}

// WithResignationAnchor returns a copy of the config with the resignation
// anchor on: an extension of the specification (see the package doc,
// "Extensions and errata"). With it, [Evaluate] anchors rule 3 of a role
// without a lease on the later of the member's registration instant and
// [RoleState.LeaseClearedAt], the timestamp of the tombstone that cleared
// the lease. After a resignation the standbys then challenge in rank
// order, one stagger apart, instead of all at once (each one's
// registration is long past), which saves the epochs of the losers.
func (c LeaseConfig) WithResignationAnchor() LeaseConfig {
	c.resignAnchor = true
	return c
}

// RenewsWithMargin reports whether the renew interval leaves the holder two
// spare attempts. The interval this package recommends is at most a third of
// the lease duration. A config outside that bound still works, and the
// holder then loses the role after fewer missed renewals.
func (c LeaseConfig) RenewsWithMargin() bool { return c.renewInterval <= c.duration/3 }

// ChallengeDelay returns the extra delay that a challenger of this rank
// takes: rank × the challenge stagger. Rank 0, and a negative rank, take
// none. The value saturates at the largest time.Duration, so a very large
// rank does not wrap the instant that a caller adds it to.
func (c LeaseConfig) ChallengeDelay(rank int) time.Duration {
	if rank <= 0 || c.challengeStagger <= 0 {
		return 0
	}
	if int64(rank) > int64(math.MaxInt64/c.challengeStagger) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(rank) * c.challengeStagger
}

// Grant builds the lease record that a member writes after it mints token:
// GrantedAt is nowMillis and Deadline is nowMillis plus the lease duration,
// both in milliseconds since the Unix epoch. A renewal writes the same
// record with the same token and a later nowMillis, so this one method
// covers a first grant and a renewal.
func (c LeaseConfig) Grant(member MemberID, token FencingToken, nowMillis int64) Lease {
	return Lease{
		Member:    member,
		Token:     token,
		GrantedAt: nowMillis,
		Deadline:  addMillis(nowMillis, c.duration),
	}
}

// Timing binds a lease record to this policy and answers the clock
// questions about it.
func (c LeaseConfig) Timing(lease Lease) LeaseTiming { return NewLeaseTiming(lease, c) }

// LeaseTiming is the lease clock of one lease record under one policy.
//
// Every method takes and returns milliseconds since the Unix epoch, because
// a deadline is a coordinate and not an extent. [LeaseTiming.RemainingAt] is
// the one exception, and it returns the extent that is left. A LeaseTiming is
// an immutable value, safe to share between goroutines.
type LeaseTiming struct {
	lease  Lease
	config LeaseConfig
}

// NewLeaseTiming binds a lease record to a policy.
func NewLeaseTiming(lease Lease, config LeaseConfig) LeaseTiming {
	return LeaseTiming{lease: lease, config: config}
}

// Lease returns the lease record behind this clock.
func (t LeaseTiming) Lease() Lease { return t.lease }

// ExpiresAt returns the instant the lease expires, in milliseconds since the
// Unix epoch. It is the Deadline of the record.
func (t LeaseTiming) ExpiresAt() int64 { return t.lease.Deadline }

// LiveAt reports whether the lease is live at this instant. The lease is
// live before its deadline and expired from the deadline on. The rank 0
// challenger challenges at exactly the deadline, so the two tests leave no
// gap and no overlap.
func (t LeaseTiming) LiveAt(nowMillis int64) bool { return nowMillis < t.lease.Deadline }

// RemainingAt returns the extent that is left before the deadline, and zero
// after the deadline.
func (t LeaseTiming) RemainingAt(nowMillis int64) time.Duration {
	if nowMillis >= t.lease.Deadline {
		return 0
	}
	left := t.lease.Deadline - nowMillis
	if left < 0 || left > math.MaxInt64/int64(time.Millisecond) { // left < 0: the difference wrapped
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(left) * time.Millisecond
}

// ChallengeAt returns the instant at which a challenger of this rank
// challenges. Rank 0 challenges at the deadline, and each later rank adds
// one challenge stagger. The sum saturates instead of wrapping. The stagger
// saves epoch churn and gives no safety.
func (t LeaseTiming) ChallengeAt(rank int) int64 {
	return addMillis(t.lease.Deadline, t.config.ChallengeDelay(rank))
}

// RenewAt returns the instant at which the holder writes its next renewal.
// The value is the grant instant plus the renew interval, and it never
// passes the deadline. A holder that follows it always writes before it
// loses the lease.
func (t LeaseTiming) RenewAt() int64 {
	return min(addMillis(t.lease.GrantedAt, t.config.renewInterval), t.lease.Deadline)
}

// RenewDueAt reports whether the holder writes a renewal at this instant:
// from [LeaseTiming.RenewAt] on.
func (t LeaseTiming) RenewDueAt(nowMillis int64) bool { return nowMillis >= t.RenewAt() }

// addMillis adds an extent, rounded up to whole milliseconds, to an instant
// in milliseconds, and saturates at the int64 bounds.
func addMillis(instant int64, extent time.Duration) int64 {
	ms := ceilMillis(extent)
	switch {
	case ms > 0 && instant > math.MaxInt64-ms:
		return math.MaxInt64
	case ms < 0 && instant < math.MinInt64-ms:
		return math.MinInt64
	}
	return instant + ms
}

// ceilMillis rounds an extent up to whole milliseconds, so a wait on it
// never ends early.
func ceilMillis(extent time.Duration) int64 {
	ms := extent.Milliseconds()
	if extent > 0 && time.Duration(ms)*time.Millisecond < extent {
		ms++
	}
	return ms
}
