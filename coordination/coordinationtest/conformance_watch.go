package coordinationtest

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// This file holds the checks of WatchPartition and WatchRoles of
// [coordination.ExtendedTransport].

// watchCycles is the number of subscriptions that watchStops opens and
// stops; a goroutine left by each would grow the count by as many.
const watchCycles = 50

// watchPartition: after the watcher read the partition, an append of
// another transport to it wakes the channel, and so does a lease written
// there; stop ends the subscription.
func (s *suite) watchPartition(t *testing.T) {
	watcher, writer := s.target.NewTransport(t), s.target.NewTransport(t)
	extended := s.extended(t, watcher)
	role, partition := s.role(t)
	changed, stop := extended.WatchPartition(partition)
	defer stop()
	s.readToEnd(t, extended, partition)
	s.drain(changed)
	key := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, "a")))
	value := coordination.EncodeRegistration(coordination.Registration{Member: member(t, "a"), RegisteredAt: time.Now().UnixMilli()})
	if err := writer.Append(s.ctx(t), partition, key, value); err != nil {
		t.Fatalf("Append: %v", err)
	}
	s.wakes(t, changed, "WatchPartition("+partition.String()+") after another transport's Append to the partition")
	s.readToEnd(t, extended, partition)
	s.drain(changed)
	token := s.mint(t, writer, role)
	if err := writer.WriteLease(s.ctx(t), partition, token, coordination.EncodeKey(coordination.LeaseKey(role)), lease(t, "a", token)); err != nil {
		t.Fatalf("WriteLease: %v", err)
	}
	s.wakes(t, changed, "WatchPartition("+partition.String()+") after another transport's WriteLease to the partition")
}

// watchRoles: a registration and a lease of the watched role, written by
// another transport, each wake the channel.
func (s *suite) watchRoles(t *testing.T) {
	watcher, writer := s.target.NewTransport(t), s.target.NewTransport(t)
	extended := s.extended(t, watcher)
	role, partition := s.role(t)
	changed, stop := extended.WatchRoles(partition, role)
	defer stop()
	if _, _, err := extended.ReadRolesFrom(s.ctx(t), partition, []coordination.Role{role}, 0); err != nil {
		t.Fatalf("ReadRolesFrom(%s): %v", partition, err)
	}
	s.drain(changed)
	key := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, "a")))
	value := coordination.EncodeRegistration(coordination.Registration{Member: member(t, "a"), RegisteredAt: time.Now().UnixMilli()})
	if err := writer.Append(s.ctx(t), partition, key, value); err != nil {
		t.Fatalf("Append: %v", err)
	}
	s.wakes(t, changed, "WatchRoles("+partition.String()+", "+role.String()+") after another transport's registration of the role")
	if _, _, err := extended.ReadRolesFrom(s.ctx(t), partition, []coordination.Role{role}, 0); err != nil {
		t.Fatalf("ReadRolesFrom(%s): %v", partition, err)
	}
	s.drain(changed)
	token := s.mint(t, writer, role)
	if err := writer.WriteLease(s.ctx(t), partition, token, coordination.EncodeKey(coordination.LeaseKey(role)), lease(t, "a", token)); err != nil {
		t.Fatalf("WriteLease: %v", err)
	}
	s.wakes(t, changed, "WatchRoles("+partition.String()+", "+role.String()+") after another transport's lease of the role")
}

// watchStops: watchCycles subscriptions of each kind, each stopped, leave
// no goroutine behind (the count comes back within watchCycles/2 of where
// it was: a transport's connections may add a few), and stop returns.
func (s *suite) watchStops(t *testing.T) {
	transport := s.target.NewTransport(t)
	extended := s.extended(t, transport)
	role, partition := s.role(t)
	s.readToEnd(t, extended, partition)
	before := runtime.NumGoroutine()
	for range watchCycles {
		_, stop := extended.WatchPartition(partition)
		stop()
		_, stop = extended.WatchRoles(partition, role)
		stop()
	}
	s.eventually(t, "the goroutines of stopped subscriptions end", func() (bool, string) {
		now := runtime.NumGoroutine()
		return now-before < watchCycles/2, fmt.Sprintf("%d goroutines before, %d after %d stopped subscriptions", before, now, 2*watchCycles)
	})
}

// readToEnd reads the partition up to its last stable offset.
func (s *suite) readToEnd(t *testing.T, extended coordination.ExtendedTransport, partition coordination.TopicPartition) {
	t.Helper()
	if _, _, err := extended.ReadPartitionFrom(s.ctx(t), partition, 0); err != nil {
		t.Fatalf("ReadPartitionFrom(%s): %v", partition, err)
	}
}

// drain takes the pending value of changed, if any.
func (s *suite) drain(changed <-chan struct{}) {
	select {
	case <-changed:
	default:
	}
}

// wakes fails t unless changed receives within the suite's timeout.
func (s *suite) wakes(t *testing.T, changed <-chan struct{}, what string) {
	t.Helper()
	timer := time.NewTimer(s.target.Timeout)
	defer timer.Stop()
	select {
	case <-changed:
	case <-timer.C:
		t.Fatalf("%s: the channel did not receive within %v; want it woken by the new record", what, s.target.Timeout)
	}
}
