package coordination

import (
	"testing"
	"time"
)

// TestDefaultTransferTimeout: max(3 × stagger, renew + 2 × poll), capped at
// the lease duration minus the renew interval.
func TestDefaultTransferTimeout(t *testing.T) {
	mustLease := func(duration, renew, stagger time.Duration) LeaseConfig {
		t.Helper()
		c, err := NewLeaseConfig(duration, renew, stagger)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct {
		lease LeaseConfig
		poll  time.Duration
		want  time.Duration
	}{
		{DefaultLeaseConfig(), DefaultPollInterval, 15 * time.Second},                               // the specification's defaults
		{mustLease(30*time.Second, 10*time.Second, time.Second), 2 * time.Second, 14 * time.Second}, // renew + 2 polls
		{mustLease(6*time.Second, 2*time.Second, 5*time.Second), time.Second, 4 * time.Second},      // capped: 6 s − 2 s
	} {
		if got := defaultTransferTimeout(c.lease, c.poll); got != c.want {
			t.Errorf("defaultTransferTimeout(%v, %v, %v, poll %v) = %v, want %v", c.lease.duration, c.lease.renewInterval, c.lease.challengeStagger, c.poll, got, c.want)
		}
	}
}

// TestLeaseHistory: the fold keeps the newest lease record of the role and
// the one before it, in offset order, a tombstone as no lease, and ignores
// other keys, other roles and records it has seen.
func TestLeaseHistory(t *testing.T) {
	f := newRulesFixture(t)
	other, err := NewRole("other")
	if err != nil {
		t.Fatal(err)
	}
	record := func(role Role, offset int64, lease *Lease) StateRecord {
		r := StateRecord{Offset: offset, Key: EncodeKey(LeaseKey(role))}
		if lease != nil {
			r.Value = EncodeLease(*lease)
		}
		return r
	}
	holder := leaseOf(f.n1, f.tok, 1_000)
	offer := leaseOf(f.me, f.tok, 2_000)
	var h leaseHistory
	h.apply(f.role, record(f.role, 0, holder))
	h.apply(f.role, StateRecord{Offset: 1, Key: EncodeKey(RegistrationKey(f.role, f.me)), Value: EncodeRegistration(Registration{Member: f.me, RegisteredAt: 1})})
	h.apply(f.role, record(other, 2, leaseOf(f.n3, f.newer, 1_500)))
	h.apply(f.role, record(f.role, 3, offer))
	h.apply(f.role, record(f.role, 3, leaseOf(f.n3, f.newer, 1_500))) // seen already
	if got := h.priorOf(*offer); got == nil || *got != *holder {
		t.Fatalf("priorOf(offer) = %v, want the holder's %v", got, holder)
	}
	if got := h.priorOf(*holder); got != nil {
		t.Fatalf("priorOf(a lease that is not the newest) = %v, want nil", got)
	}
	h.apply(f.role, record(f.role, 4, nil))
	h.apply(f.role, record(f.role, 5, offer))
	if got := h.priorOf(*offer); got != nil {
		t.Fatalf("priorOf after a tombstone = %v, want nil", got)
	}
}
