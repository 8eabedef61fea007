package coordination_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestNameError (issue 11, item 7): an invalid name is a *NameError that
// names the kind, the name and the reason, so a caller reads fields
// instead of parsing the message.
func TestNameError(t *testing.T) {
	for _, tc := range []struct {
		kind, name, reason string
		make               func(string) error
	}{
		{"role", "", "empty", func(n string) error { _, err := coordination.NewRole(n); return err }},
		{"member id", "", "empty", func(n string) error { _, err := coordination.NewMemberID(n); return err }},
		{"role", strings.Repeat("r", coordination.MaxRoleLen+1), "bytes, the maximum is", func(n string) error { _, err := coordination.NewRole(n); return err }},
		{"member id", "bad\xff", "not UTF-8", func(n string) error { _, err := coordination.NewMemberID(n); return err }},
	} {
		err := tc.make(tc.name)
		var nameErr *coordination.NameError
		if !errors.As(err, &nameErr) || nameErr.Kind != tc.kind || nameErr.Name != tc.name || !strings.Contains(nameErr.Reason, tc.reason) {
			t.Errorf("the %s %q: %#v; want a *NameError of kind %q whose reason says %q", tc.kind, tc.name, err, tc.kind, tc.reason)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "coordination: invalid "+tc.kind) || strings.Count(msg, "coordination: ") != 1 {
			t.Errorf("the %s %q: message %q; want one coordination: prefix and the kind", tc.kind, tc.name, msg)
		}
	}
}

// TestErrorPrefixOnce (issue 11, item 7): an error that the package wraps
// on its way up, from KafkaTransport through Leadership.Write, carries the
// "coordination: " prefix once, and errors.Is still finds the sentinel
// inside.
func TestErrorPrefixOnce(t *testing.T) {
	c := kafkatest.Fake(t)
	e := klNewEnv(t, c, klConfig(t, 6*time.Second, 2*time.Second, time.Second))
	role := ktRole(t, "prefix")
	commands := c.CreateTopic(t, "coord-prefix-commands", 1, nil)
	holder := e.campaign(t, e.member(t, "node-1"), role, "node-1").await(t, 30*time.Second)
	ctx := ktContext(t)
	if _, err := e.transport(t).AcquireEpoch(ctx, role); err != nil {
		t.Fatalf("the rival's AcquireEpoch: %v", err)
	}
	err := holder.Write(ctx, coordination.GuardedRecord{Topic: commands, Value: []byte("late")})
	t.Logf("%v", err)
	if !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("a write after the rival minted = %v; want ErrFenced", err)
	}
	if n := strings.Count(err.Error(), "coordination: "); n != 1 {
		t.Fatalf("the fenced write's message carries the coordination: prefix %d times: %q", n, err.Error())
	}
}
