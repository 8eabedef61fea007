package coordination_test

import (
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// The fixtures of the tests of the pure core. Their names carry the fx prefix
// so that they stay clear of the helpers of other test files of this package.

func fxRole(t testing.TB, name string) coordination.Role {
	t.Helper()
	role, err := coordination.NewRole(name)
	if err != nil {
		t.Fatalf("NewRole(%q): %v", name, err)
	}
	return role
}

func fxMember(t testing.TB, name string) coordination.MemberID {
	t.Helper()
	member, err := coordination.NewMemberID(name)
	if err != nil {
		t.Fatalf("NewMemberID(%q): %v", name, err)
	}
	return member
}

func fxToken(t testing.TB, producerID int64, producerEpoch int16) coordination.FencingToken {
	t.Helper()
	token, err := coordination.NewFencingToken(producerID, producerEpoch)
	if err != nil {
		t.Fatalf("NewFencingToken(%d, %d): %v", producerID, producerEpoch, err)
	}
	return token
}

func fxConfig(t testing.TB, duration, renew, stagger int64) coordination.LeaseConfig {
	t.Helper()
	config, err := coordination.NewLeaseConfig(fxMillis(duration), fxMillis(renew), fxMillis(stagger))
	if err != nil {
		t.Fatalf("NewLeaseConfig(%dms, %dms, %dms): %v", duration, renew, stagger, err)
	}
	return config
}

// fxRegistration is the log record of one registration.
func fxRegistration(t testing.TB, role coordination.Role, member string, offset, registeredAt int64) coordination.StateRecord {
	t.Helper()
	m := fxMember(t, member)
	return coordination.StateRecord{
		Offset: offset,
		Key:    coordination.EncodeKey(coordination.RegistrationKey(role, m)),
		Value:  coordination.EncodeRegistration(coordination.Registration{Member: m, RegisteredAt: registeredAt}),
	}
}

// fxDeregistration is the tombstone of the registration of one member.
func fxDeregistration(t testing.TB, role coordination.Role, member string, offset int64) coordination.StateRecord {
	t.Helper()
	return coordination.StateRecord{
		Offset: offset,
		Key:    coordination.EncodeKey(coordination.RegistrationKey(role, fxMember(t, member))),
	}
}

// fxLease is the log record of one lease with token 11:1.
func fxLease(t testing.TB, role coordination.Role, member string, offset, grantedAt, deadline int64) coordination.StateRecord {
	t.Helper()
	return coordination.StateRecord{
		Offset: offset,
		Key:    coordination.EncodeKey(coordination.LeaseKey(role)),
		Value: coordination.EncodeLease(coordination.Lease{
			Member:    fxMember(t, member),
			Token:     fxToken(t, 11, 1),
			GrantedAt: grantedAt,
			Deadline:  deadline,
		}),
	}
}

// fxLeaseTombstone is the tombstone that clears the lease of a role.
func fxLeaseTombstone(role coordination.Role, offset int64) coordination.StateRecord {
	return coordination.StateRecord{Offset: offset, Key: coordination.EncodeKey(coordination.LeaseKey(role)), Value: []byte{}}
}

// fxMillis is an extent of n milliseconds.
func fxMillis(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
