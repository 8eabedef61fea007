package main

// The lease flags of a command that takes a role (elect, run, demo):
// their bounds, and the lease policy and the options of the library that
// they make.

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// leaseFlags are the lease timing flags of a command that takes a role.
type leaseFlags struct {
	duration time.Duration
	renew    time.Duration
	stagger  time.Duration
	poll     time.Duration

	heartbeat time.Duration // 0: no heartbeats (the specification's layout)
}

// add registers the flags with the given defaults.
func (l *leaseFlags) add(f *pflag.FlagSet, duration, renew, stagger, poll time.Duration) {
	f.DurationVar(&l.duration, "lease-duration", duration, "extent of a lease, at least 1s; a standby challenges a silent holder after it (also the transaction timeout, at most the brokers' transaction.max.timeout.ms, 15m by default)")
	f.DurationVar(&l.renew, "renew-interval", renew, "gap between two renewals of the holder; at least 100ms and at most a third of the lease duration")
	f.DurationVar(&l.stagger, "challenge-stagger", stagger, "extra wait of each rank of succession past the deadline")
	f.DurationVar(&l.poll, "poll-interval", poll, "longest gap between two reads of the state topic while a member waits")
	f.DurationVar(&l.heartbeat, "heartbeat-interval", 0, "switch heartbeats on: a waiting standby writes a heartbeat record every interval, and one unseen for 3 of them loses its rank; every member of a role passes the same value (default 0: off, the specification's layout, which readers of older releases and other ports decode)")
}

// Bounds of the lease flags. A lease is one Kafka transaction timeout,
// and a renewal is one transaction, which takes tens of milliseconds on a
// healthy cluster and can take hundreds on a loaded one: a shorter lease
// is elected and then lost at its first late renewal.
const (
	minLeaseDuration = time.Second
	minRenewInterval = 100 * time.Millisecond
)

// config validates the flags into a lease policy: a lease of at least
// minLeaseDuration, renewed at least every third of it (so that two
// renewals may fail before the deadline), and a renew interval of at least
// minRenewInterval.
func (l *leaseFlags) config() (coordination.LeaseConfig, error) {
	switch {
	case l.duration < minLeaseDuration:
		return coordination.LeaseConfig{}, usageError("--lease-duration %v: want at least %v; a shorter lease is lost at the first renewal that takes longer than a third of it", l.duration, minLeaseDuration)
	case l.renew < minRenewInterval:
		return coordination.LeaseConfig{}, usageError("--renew-interval %v: want at least %v", l.renew, minRenewInterval)
	case l.renew > l.duration/3:
		return coordination.LeaseConfig{}, usageError("--renew-interval %v is above a third of --lease-duration %v: want at most %v, so that the holder may miss two renewals before its deadline",
			l.renew, l.duration, (l.duration / 3).Truncate(time.Millisecond))
	case l.stagger <= 0:
		return coordination.LeaseConfig{}, usageError("--challenge-stagger %v: want a duration above zero, such as 1s", l.stagger)
	case l.poll <= 0:
		return coordination.LeaseConfig{}, usageError("--poll-interval %v: want a duration above zero, such as 1s", l.poll)
	case l.heartbeat < 0 || (l.heartbeat > 0 && l.heartbeat < minRenewInterval):
		return coordination.LeaseConfig{}, usageError("--heartbeat-interval %v: want at least %v, or 0 for no heartbeats (the default)", l.heartbeat, minRenewInterval)
	}
	config, err := coordination.NewLeaseConfig(l.duration, l.renew, l.stagger)
	if err != nil {
		msg := errText(err)
		return config, usageError("--lease-duration %v, --renew-interval %v, --challenge-stagger %v: %s", l.duration, l.renew, l.stagger, msg)
	}
	return withHeartbeat(config, l.heartbeat)
}

// withHeartbeat switches heartbeats on at this interval; zero keeps the
// policy's own (off, unless the policy has them).
func withHeartbeat(config coordination.LeaseConfig, heartbeat time.Duration) (coordination.LeaseConfig, error) {
	if heartbeat == 0 {
		return config, nil
	}
	config, err := config.WithHeartbeatInterval(heartbeat)
	if err != nil {
		return config, usageError("--heartbeat-interval %v: %s", heartbeat, errText(err))
	}
	return config, nil
}

// options are the library options of the lease flags.
func (l *leaseFlags) options(config coordination.LeaseConfig) []coordination.Option {
	return []coordination.Option{coordination.WithLeaseConfig(config), coordination.WithPollInterval(l.poll)}
}
