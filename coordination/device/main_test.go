package device_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// TestMain fails the package's tests when a goroutine that a test started
// (a gate's refresh, a reader's consumer) is still running after the last
// test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func fxRole(t testing.TB, name string) coordination.Role {
	t.Helper()
	role, err := coordination.NewRole(name)
	if err != nil {
		t.Fatalf("NewRole(%q): %v", name, err)
	}
	return role
}

func fxToken(t testing.TB, producerID int64, producerEpoch int16) coordination.FencingToken {
	t.Helper()
	token, err := coordination.NewFencingToken(producerID, producerEpoch)
	if err != nil {
		t.Fatalf("NewFencingToken(%d, %d): %v", producerID, producerEpoch, err)
	}
	return token
}
