package main

// The roster view of a command that shows ranks (describe, list, watch):
// the heartbeat interval by which it tells a lapsed standby.

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// addRosterLapseFlag registers --heartbeat-interval on a command that
// shows ranks: the members' heartbeat interval, from which it tells a
// lapsed standby.
func addRosterLapseFlag(f *pflag.FlagSet, heartbeat *time.Duration) {
	f.DurationVar(heartbeat, "heartbeat-interval", 0,
		"the members' heartbeat interval (their --heartbeat-interval): a standby whose heartbeats stopped for 3 of them is shown lapsed, without a rank; a standby that writes no heartbeats never lapses "+
			"(default: the lease duration of the role's lease record; 30s for a role without a lease, and for watch)")
}

// rosterView is the lease policy by which a command that shows ranks
// tells a lapsed standby. A heartbeat of 0 (the flag's default) gives the
// zero LeaseConfig, autoView: each role's own lease duration (lapseView).
func rosterView(heartbeat time.Duration) (coordination.LeaseConfig, error) {
	if heartbeat == 0 {
		return autoView, nil
	}
	if heartbeat < minRenewInterval {
		return coordination.LeaseConfig{}, usageError("--heartbeat-interval %v: want at least %v", heartbeat, minRenewInterval)
	}
	return withHeartbeat(coordination.DefaultLeaseConfig(), heartbeat)
}

// autoView is the view of rosterView without --heartbeat-interval: the
// roster lapse of a role follows the lease duration of its lease record.
var autoView = coordination.LeaseConfig{}

// lapseView returns the lease policy by which rankOrder tells a lapsed
// standby of the role: view itself, unless it is autoView; then the
// default policy with the heartbeat interval of the members' default, the
// lease duration that the role's lease record carries (its deadline minus
// its grant), and the default policy for a role without a lease.
func lapseView(state coordination.RoleState, view coordination.LeaseConfig) coordination.LeaseConfig {
	if view != autoView {
		return view
	}
	if lease := state.Lease; lease != nil {
		if d := time.Duration(lease.Deadline-lease.GrantedAt) * time.Millisecond; d >= minRenewInterval {
			if config, err := coordination.DefaultLeaseConfig().WithHeartbeatInterval(d); err == nil {
				return config
			}
		}
	}
	return coordination.DefaultLeaseConfig()
}
