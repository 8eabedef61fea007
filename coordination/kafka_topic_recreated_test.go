package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The tests of a state topic deleted and created again under running
// members (issue 28): every member notices within a poll; the standbys'
// fold starts over from the new log and they register again, while the
// holder keeps the role; a topic created again with fewer partitions stops
// every campaign with ErrMisconfigured.

func TestKafkaTopicRecreatedFake(t *testing.T) {
	t.Run("StandbysRegisterAgain", func(t *testing.T) { ktRecreatedStandbysRegisterAgain(t, kafkatest.Fake(t)) })
	t.Run("FewerPartitionsStopTheCampaigns", func(t *testing.T) { ktRecreatedFewerPartitions(t, kafkatest.Fake(t)) })
	t.Run("ObserveFoldsTheNewLog", func(t *testing.T) { ktRecreatedObserve(t, kafkatest.Fake(t)) })
}

func TestKafkaTopicRecreatedKafka(t *testing.T) {
	kafkatest.Kafka(t) // skip (or fail under CI) before any subtest
	t.Run("StandbysRegisterAgain", func(t *testing.T) { ktRecreatedStandbysRegisterAgain(t, kafkatest.Kafka(t)) })
	t.Run("FewerPartitionsStopTheCampaigns", func(t *testing.T) { ktRecreatedFewerPartitions(t, kafkatest.Kafka(t)) })
	t.Run("ObserveFoldsTheNewLog", func(t *testing.T) { ktRecreatedObserve(t, kafkatest.Kafka(t)) })
}

// ktRecreateStateTopic deletes the state topic and creates it again,
// compacted, with partitions partitions, retrying the create while the
// cluster still deletes the old topic (Kafka deletes in the background).
func ktRecreateStateTopic(t *testing.T, c *kafkatest.Cluster, admin *coordination.KafkaTransport, topic string, partitions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Admin(t).DeleteTopic(ctx, topic); err != nil {
		t.Fatalf("delete the state topic %s: %v", topic, err)
	}
	for {
		err := admin.CreateStateTopic(ctx, 1, 1, coordination.WithTopic(topic), coordination.WithPartitions(partitions))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create the state topic %s again: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.WaitTopicReady(t, topic, partitions)
}

// ktRecreatedStandbysRegisterAgain: a holder and two standbys run; the
// state topic is deleted and created again with the same count. The
// standbys' folds start over and they register again in the new log. The
// holder either renews into the new log and keeps its token, or its
// leadership ends with an error (a transactional produce into the new
// partition can lose its producer: OUT_OF_ORDER_SEQUENCE_NUMBER), and then
// one standby takes over: the role is never held silently by two, and no
// standby challenges a holder whose lease lands in the new log. On today's
// main the standbys kept their old fold and never registered again.
func ktRecreatedStandbysRegisterAgain(t *testing.T, c *kafkatest.Cluster) {
	e := klNewEnv(t, c, klConfig(t, 3*time.Second, time.Second, time.Second))
	role := ktRole(t, "recreated")
	a, b, d := e.member(t, "node-a"), e.member(t, "node-b"), e.member(t, "node-d")
	holder := e.campaign(t, a, role, "node-a").await(t, 30*time.Second)
	cb := e.campaign(t, b, role, "node-b")
	e.waitRosterHeld(t, role, "node-a,node-b", "node-a")
	cd := e.campaign(t, d, role, "node-d")
	e.waitRosterHeld(t, role, "node-a,node-b,node-d", "node-a")

	ktRecreateStateTopic(t, c, e.observer, e.topic, 16)
	recreated := time.Now()
	// A new observer, which reads the new log only: the old one's view is
	// of the old log until its own reader notices.
	e.observer = e.transport(t)
	klEventually(t, 30*time.Second, "both standbys registered again in the new log", func() (bool, string) {
		state := e.state(t, role)
		var roster []string
		for _, entry := range state.Roster {
			roster = append(roster, entry.Member.String())
		}
		return slices.Contains(roster, "node-b") && slices.Contains(roster, "node-d"), "roster " + strings.Join(roster, ",") + ", lease " + ktLeaseText(state.Lease)
	})
	t.Logf("the standbys registered again %v after the topic was created again", time.Since(recreated))
	// A standby may register again before its reader compares the topic
	// ids (its own registration is missing from the new log); the notice
	// of the new incarnation follows within a poll or two.
	for _, cc := range []*klCampaign{cb, cd} {
		klEventually(t, 10*time.Second, cc.name+" logged that its fold started over", func() (bool, string) {
			n := cc.log.count("the state topic was deleted and created again")
			return n > 0, fmt.Sprintf("%d such lines", n)
		})
	}
	// The new log gets a lease: the holder's renewal, or a successor's
	// first lease after the holder's leadership ended.
	var lease coordination.Lease
	klEventually(t, 30*time.Second, "a lease in the new log", func() (bool, string) {
		state := e.state(t, role)
		if state.Lease != nil {
			lease = *state.Lease
		}
		return state.Lease != nil, "lease " + ktLeaseText(state.Lease)
	})
	// Two lease durations more: a standby that took the new log for a
	// role without a holder would have challenged by now.
	time.Sleep(2 * e.lease.Duration())
	status := e.describe(t, role)
	if holder.Err() == nil {
		t.Logf("node-a kept the role across the re-creation (lease %s)", ktLeaseText(&lease))
		if !status.Authoritative(holder.Token()) {
			t.Fatalf("node-a holds as far as it knows, but DescribeLeadership = %v; want its %s authoritative", status, holder.Token())
		}
		for _, m := range []*klTransport{b, d} {
			if minted := m.mintedTokens(); len(minted) > 0 {
				t.Fatalf("%s minted %v while node-a renewed into the new log", m.name, minted)
			}
		}
		for _, cc := range []*klCampaign{cb, cd} {
			if cc.finished() {
				t.Fatalf("%s: AcquireLeadership returned (%v, %v); want it waiting as a standby", cc.name, cc.leadership, cc.err)
			}
		}
		return
	}
	t.Logf("node-a's leadership ended after the re-creation: %v", holder.Err())
	var winners []*klCampaign
	for _, cc := range []*klCampaign{cb, cd} {
		if cc.finished() {
			if cc.err != nil {
				t.Fatalf("%s: AcquireLeadership = %v after node-a's leadership ended; want a win or a wait", cc.name, cc.err)
			}
			winners = append(winners, cc)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d standbys won after node-a's leadership ended; want exactly one", len(winners))
	}
	if w := winners[0].leadership; w.Err() != nil || !status.Authoritative(w.Token()) {
		t.Fatalf("the successor %s: Err %v, DescribeLeadership %v; want it holding, authoritative", winners[0].name, w.Err(), status)
	}
}

func ktLeaseText(lease *coordination.Lease) string {
	if lease == nil {
		return "none"
	}
	return lease.Member.String() + " " + lease.Token.String()
}

// ktRecreatedFewerPartitions: two standbys wait, one on a partition that
// the topic created again keeps, one on a partition that it loses. Both
// campaigns stop with ErrMisconfigured: the partition that no longer
// exists, and the count that no longer matches WithPartitions. On today's
// main both kept waiting.
func ktRecreatedFewerPartitions(t *testing.T, c *kafkatest.Cluster) {
	e := klNewEnv(t, c, klConfig(t, 3*time.Second, time.Second, time.Second))
	const fewer = 4
	roleOn := func(keep bool) coordination.Role {
		for {
			role := ktRole(t, "shrunk")
			if (ktPartition(t, role, e.options).Partition < fewer) == keep {
				return role
			}
		}
	}
	kept, lost := roleOn(true), roleOn(false)
	holderKept := e.campaign(t, e.member(t, "holder-kept"), kept, "holder").await(t, 30*time.Second)
	holderLost := e.campaign(t, e.member(t, "holder-lost"), lost, "holder").await(t, 30*time.Second)
	standbys := map[string]*klCampaign{
		"kept": e.campaign(t, e.member(t, "standby-kept"), kept, "standby"),
		"lost": e.campaign(t, e.member(t, "standby-lost"), lost, "standby"),
	}
	e.waitRosterHeld(t, kept, "holder,standby", "holder")
	e.waitRosterHeld(t, lost, "holder,standby", "holder")

	ktRecreateStateTopic(t, c, e.observer, e.topic, fewer)
	recreated := time.Now()
	for which, cc := range standbys {
		select {
		case <-cc.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("the standby on the partition the topic %s: still waiting 30 s after the topic was created again with %d partitions", which, fewer)
		}
		if !errors.Is(cc.err, coordination.ErrMisconfigured) {
			t.Fatalf("the standby on the partition the topic %s: AcquireLeadership = (%v, %v); want ErrMisconfigured", which, cc.leadership, cc.err)
		}
		t.Logf("the standby on the partition the topic %s stopped %v after the topic was created again: %v", which, time.Since(recreated), cc.err)
	}
	// What the holders learn is the renewal's to say; the test only
	// records it.
	time.Sleep(2 * e.lease.Duration())
	t.Logf("after two lease durations: the holder on the partition the topic kept: Err %v; on the partition it lost: Err %v", holderKept.Err(), holderLost.Err())
}

// ktRecreatedObserve: Observe follows a held role; the state topic is
// deleted and created again. The observer folds the role anew from the new
// log and yields its state again (ChangeState): a roster without the
// holder's registration, which only the old log had. On today's main it
// went on with the old fold and yielded nothing.
func ktRecreatedObserve(t *testing.T, c *kafkatest.Cluster) {
	e := klNewEnv(t, c, klConfig(t, 3*time.Second, time.Second, time.Second))
	role := ktRole(t, "observed")
	e.campaign(t, e.member(t, "node-a"), role, "node-a").await(t, 30*time.Second)
	e.waitRosterHeld(t, role, "node-a", "node-a")
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan coordination.RoleChange, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for change, err := range coordination.Observe(ctx, e.observer, []coordination.Role{role}, e.options...) {
			if err == nil {
				changes <- change
			}
		}
	}()
	defer func() { cancel(); <-done }()
	next := func(what string) coordination.RoleChange {
		t.Helper()
		select {
		case change := <-changes:
			return change
		case <-time.After(30 * time.Second):
			t.Fatalf("no change within 30 s, waiting for %s", what)
		}
		return coordination.RoleChange{}
	}
	for next("ChangeSynced").Kind != coordination.ChangeSynced {
	}
	ktRecreateStateTopic(t, c, e.observer, e.topic, 16)
	for {
		change := next("the state of the role folded from the new log")
		if change.Kind != coordination.ChangeState {
			continue
		}
		if _, registered := change.State.Entry(fxMember(t, "node-a")); registered {
			t.Fatalf("the state yielded after the topic was created again ranks node-a, whose registration only the old log had: %+v", change.State)
		}
		t.Logf("the state folded from the new log: lease %s, %d in the roster", ktLeaseText(change.State.Lease), len(change.State.Roster))
		return
	}
}
