package coordination_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

func TestRoleTopicPartition(t *testing.T) {
	role := fxRole(t, "controller")
	tests := []struct {
		name    string
		options []coordination.Option
		want    coordination.TopicPartition
	}{
		{"defaults", nil, coordination.TopicPartition{Topic: "__coordination_state", Partition: 12}},
		{"another partition count", []coordination.Option{coordination.WithPartitions(7)}, coordination.TopicPartition{Topic: coordination.StateTopic, Partition: partitionOf(t, role, 7)}},
		{"one partition", []coordination.Option{coordination.WithPartitions(1)}, coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 0}},
		{"another topic", []coordination.Option{coordination.WithTopic("ops.coordination_v2-test")}, coordination.TopicPartition{Topic: "ops.coordination_v2-test", Partition: 12}},
		{"a topic of 249 bytes", []coordination.Option{coordination.WithTopic(strings.Repeat("t", 249))}, coordination.TopicPartition{Topic: strings.Repeat("t", 249), Partition: 12}},
		{"the last option wins", []coordination.Option{coordination.WithPartitions(7), coordination.WithTopic("a"), coordination.WithPartitions(16), coordination.WithTopic("b")}, coordination.TopicPartition{Topic: "b", Partition: 12}},
		{"timing options leave the answer alone", []coordination.Option{
			coordination.WithLeaseDuration(time.Minute),
			coordination.WithRenewInterval(time.Second),
			coordination.WithChallengeStagger(time.Hour),
			coordination.WithPollInterval(time.Millisecond),
			coordination.WithClock(coordination.NewManualClock(0)),
			coordination.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			coordination.WithLeaseConfig(coordination.DefaultLeaseConfig()),
		}, coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 12}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got, err := coordination.RoleTopicPartition(role, test.options...)
			if err != nil || got != test.want {
				t.Errorf("RoleTopicPartition = %v, %v; want %v", got, err, test.want)
			}
		})
	}
}

func partitionOf(t *testing.T, role coordination.Role, partitions int) int {
	t.Helper()
	p, err := coordination.RolePartition(role, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInvalidOptionsNameTheOption(t *testing.T) {
	tests := []struct {
		option coordination.Option
		names  string
	}{
		{coordination.WithPartitions(0), "WithPartitions"},
		{coordination.WithPartitions(-3), "WithPartitions"},
		{coordination.WithLeaseDuration(0), "WithLeaseDuration"},
		{coordination.WithLeaseDuration(-time.Second), "WithLeaseDuration"},
		{coordination.WithLeaseDuration(5 * time.Second), "WithLeaseDuration"},        // below the default renew interval: a policy error
		{coordination.WithLeaseDuration(500 * time.Microsecond), "WithLeaseDuration"}, // likewise
		{coordination.WithRenewInterval(0), "WithRenewInterval"},
		{coordination.WithRenewInterval(40 * time.Second), "WithRenewInterval"}, // above the default duration
		{coordination.WithRenewInterval(30 * time.Second), "WithRenewInterval"}, // equal to it
		{coordination.WithChallengeStagger(0), "WithChallengeStagger"},
		{coordination.WithChallengeStagger(-time.Second), "WithChallengeStagger"},
		{coordination.WithPollInterval(0), "WithPollInterval"},
		{coordination.WithPollInterval(-time.Second), "WithPollInterval"},
		{coordination.WithTopic(""), "WithTopic"},
		{coordination.WithTopic("bad topic"), "WithTopic"},
		{coordination.WithTopic("."), "WithTopic"},
		{coordination.WithTopic(".."), "WithTopic"},
		{coordination.WithTopic(strings.Repeat("t", 250)), "WithTopic"},
		{coordination.WithTopic("état"), "WithTopic"},
		{coordination.WithTopic("a/b"), "WithTopic"},
		{coordination.WithClock(nil), "WithClock"},
		{coordination.WithLogger(nil), "WithLogger"},
		{coordination.WithLeaseConfig(coordination.LeaseConfig{}), "WithLeaseConfig"},
	}
	role := fxRole(t, "controller")
	transport := coordinationtest.NewCluster().Transport("node-1")
	for _, test := range tests {
		// AcquireLeadership refuses each, before it writes anything.
		if _, err := coordination.AcquireLeadership(context.Background(), transport, role, fxMember(t, "node-1"), test.option); err == nil {
			t.Errorf("AcquireLeadership with an invalid %s gave no error", test.names)
		} else if !strings.Contains(err.Error(), test.names) {
			t.Errorf("error %q does not name %s", err, test.names)
		}
	}
	// RoleTopicPartition refuses an option out of its own range; a lease
	// policy that does not hold together is no error there, because only
	// WithTopic and WithPartitions change its answer.
	for _, option := range []coordination.Option{coordination.WithPartitions(0), coordination.WithTopic(""), coordination.WithClock(nil), coordination.WithLeaseDuration(0)} {
		if got, err := coordination.RoleTopicPartition(role, option); err == nil {
			t.Errorf("RoleTopicPartition with an option out of range gave %v and no error", got)
		}
	}
	for _, option := range []coordination.Option{coordination.WithLeaseDuration(5 * time.Second), coordination.WithRenewInterval(40 * time.Second)} {
		if got, err := coordination.RoleTopicPartition(role, option); err != nil || got.Partition != 12 {
			t.Errorf("RoleTopicPartition with a lease policy it does not use = %v, %v; want __coordination_state-12", got, err)
		}
	}
	if transport.Calls(coordinationtest.OpAppend) != 0 {
		t.Errorf("an AcquireLeadership with an invalid option wrote a record")
	}
	if _, err := coordination.RoleTopicPartition(role, nil); err == nil {
		t.Error("a nil Option gave no error")
	}
	// The specification: only WithTopic and WithPartitions change the
	// answer, and the zero Role gets the partition of the empty name, as
	// RolePartition gives it.
	if tp, err := coordination.RoleTopicPartition(coordination.Role{}); err != nil || tp.Topic != coordination.StateTopic {
		t.Errorf("RoleTopicPartition(Role{}) = %v, %v; want a partition of %s", tp, err, coordination.StateTopic)
	}
}

func TestLeaseOptionsCombineInAnyOrder(t *testing.T) {
	role := fxRole(t, "controller")
	for _, options := range [][]coordination.Option{
		{coordination.WithRenewInterval(40 * time.Second), coordination.WithLeaseDuration(2 * time.Minute)},
		{coordination.WithLeaseDuration(2 * time.Minute), coordination.WithRenewInterval(40 * time.Second)},
		{coordination.WithLeaseDuration(3 * time.Second), coordination.WithRenewInterval(time.Second)},
		{coordination.WithLeaseConfig(coordination.DefaultLeaseConfig()), coordination.WithRenewInterval(20 * time.Second)},
	} {
		if _, err := coordination.RoleTopicPartition(role, options...); err != nil {
			t.Errorf("valid options rejected: %v", err)
		}
	}
	// A later WithLeaseConfig replaces the timings an earlier option set.
	config := fxConfig(t, 45000, 15000, 1000) // 50 s would not fit below 45 s
	if _, err := coordination.RoleTopicPartition(role, coordination.WithRenewInterval(50*time.Second), coordination.WithLeaseConfig(config)); err != nil {
		t.Errorf("WithLeaseConfig after WithRenewInterval: %v", err)
	}
}
