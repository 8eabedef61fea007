package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// TestMembersOverTheInMemoryCluster runs three members over the in-memory
// cluster of coordinationtest, cuts each of them off in turn for longer than
// the lease, loses the reply of a guarded write, and checks the result with
// the checker: the member loop and the checker agree on a run without Kafka.
func TestMembersOverTheInMemoryCluster(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	dir := t.TempDir()
	roles := []string{"controller", "archiver"}
	const commandTopic = "commands"
	lease := 300 * time.Millisecond
	config, err := coordination.NewLeaseConfig(lease, 100*time.Millisecond, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	members := []string{"m1", "m2", "m3"}
	transports := make(map[string]*coordinationtest.Transport)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var logs []*LineLog
	for _, id := range members {
		transport := cluster.Transport(id)
		transports[id] = transport
		acks, err := OpenLineLog(filepath.Join(dir, id+".acks"), nil)
		if err != nil {
			t.Fatal(err)
		}
		events, err := OpenLineLog(filepath.Join(dir, id+".events"), nil)
		if err != nil {
			t.Fatal(err)
		}
		history, err := OpenLineLog(filepath.Join(dir, id+".history"), nil)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, acks, events, history)
		member, err := NewMember(MemberConfig{
			ID: id, Incarnation: 1, Roles: roles, CommandTopic: commandTopic, Spread: 2,
			Options: []coordination.Option{
				coordination.WithLeaseConfig(config),
				coordination.WithPollInterval(20 * time.Millisecond),
				coordination.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			},
			CommandInterval: 10 * time.Millisecond,
			WriteTimeout:    time.Second,
			RetryInterval:   20 * time.Millisecond,
			Acks:            acks,
			Events:          events,
			History:         history,
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := member.Run(ctx, transport); err != nil {
				t.Errorf("member %s: %v", id, err)
			}
		})
	}

	// The faults start once each role has a leader that wrote a command.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		written := 0
		for i := range roles {
			if len(cluster.Records(coordination.TopicPartition{Topic: commandTopic, Partition: i})) > 0 {
				written++
			}
		}
		if written == len(roles) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s, %d of %d roles have a command; want a leader of each", written, len(roles))
		}
	}
	var faults []Fault
	for i, id := range append(members, members...) {
		if i == 2 {
			// A commit whose reply is lost: the outcome is unknown to the
			// writer, and the command must still appear once at most.
			for _, tr := range transports {
				// The error says so, as the ExtendedTransport.WriteGuarded contract asks:
				// a plain error would say that nothing committed, and the
				// checkers would call the visible command a false report.
				tr.LoseNextReply(coordinationtest.OpWriteGuarded, fmt.Errorf("reply lost: %w", coordination.ErrOutcomeUnknown))
			}
		}
		f := Fault{Index: i, Kind: FaultCut, Target: id, StartMillis: time.Now().UnixMilli()}
		transports[id].Cut()
		time.Sleep(2 * lease) // the fault itself: cut off for two leases
		transports[id].Heal()
		f.EndMillis = time.Now().UnixMilli()
		faults = append(faults, f)
		time.Sleep(lease) // healed for a lease before the next fault
	}
	cancel()
	wg.Wait()
	for _, l := range logs {
		l.Close()
	}

	in := CheckInput{
		Roles:    roles,
		Commands: map[string][]CommandRecord{},
		Leases:   map[string][]LeaseRecord{},
		Faults:   faults,
		Config:   CheckConfig{Members: len(members), Lease: lease, Stagger: 50 * time.Millisecond, Slack: time.Second},
	}
	for i, name := range roles {
		partitions, err := CommandPartitions(i, len(roles), 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range partitions {
			for _, r := range cluster.Records(coordination.TopicPartition{Topic: commandTopic, Partition: int(p)}) {
				in.Commands[name] = append(in.Commands[name], CommandRecord{Partition: p, Offset: r.Offset, Value: r.Value})
			}
		}
		role, _ := coordination.NewRole(name)
		partition, err := coordination.RoleTopicPartition(role)
		if err != nil {
			t.Fatal(err)
		}
		leases, err := LeaseRecords(role, cluster.Records(partition))
		if err != nil {
			t.Fatal(err)
		}
		in.Leases[name] = leases
	}
	for _, id := range members {
		acks, err := ReadLines[Ack](filepath.Join(dir, id+".acks"))
		if err != nil {
			t.Fatal(err)
		}
		events, err := ReadLines[Event](filepath.Join(dir, id+".events"))
		if err != nil {
			t.Fatal(err)
		}
		history, err := ReadLines[HistoryEntry](filepath.Join(dir, id+".history"))
		if err != nil {
			t.Fatal(err)
		}
		in.Acks = append(in.Acks, acks...)
		in.Events = append(in.Events, events...)
		in.History = append(in.History, history...)
	}
	r := Check(in)
	if !r.OK() {
		t.Fatalf("Check: violations %v, lost %v, linearizability %+v", r.Violations, r.Lost, r.Linearizability)
	}
	// Both checkers read the run: the Porcupine check saw every write.
	if r.Linearizability.Result != LinearOK || r.Linearizability.Ops < r.Acknowledged {
		t.Errorf("linearizability %+v; want ok over at least the %d acknowledged writes", r.Linearizability, r.Acknowledged)
	}
	// The same history against a read that lost one acknowledged record
	// does not linearize: the check is not vacuous on a real history.
	lossy := map[string][]CommandRecord{}
	for role, records := range in.Commands {
		lossy[role] = slices.Delete(slices.Clone(records), len(records)/2, len(records)/2+1)
	}
	if got := CheckLinearizable(LinearizabilityInput{Roles: roles, Commands: lossy, History: in.History, Timeout: time.Minute}); got.Result != LinearIllegal {
		t.Errorf("linearizability of the run with a record taken out of each role = %+v; want illegal", got)
	}
	// Each leader is cut for two leases, so the roles change hands; the
	// failover figures depend on the scheduler, and are only logged.
	if r.LeadershipChanges < 2 || r.Acknowledged == 0 {
		t.Errorf("Check: %d leadership changes, %d acks; want at least 2 and 1", r.LeadershipChanges, r.Acknowledged)
	}
	t.Logf("%d commands, %d acked, %d changes, %d refused, %d unknown (%d present), failovers %+v, linearizability %+v",
		r.Commands, r.Acknowledged, r.LeadershipChanges, r.Refused, r.Unknown, r.UnknownPresent, r.FailoverStats, r.Linearizability)
}

func TestNewMemberRejectsAnIncompleteConfig(t *testing.T) {
	log, err := OpenLineLog(filepath.Join(t.TempDir(), "x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	good := MemberConfig{ID: "m1", Roles: []string{"r"}, CommandTopic: "c", Acks: log, Events: log,
		CommandInterval: time.Millisecond, WriteTimeout: time.Second}
	if _, err := NewMember(good); err != nil {
		t.Fatalf("NewMember(complete config): %v", err)
	}
	for name, edit := range map[string]func(*MemberConfig){
		"no id":       func(c *MemberConfig) { c.ID = "" },
		"no roles":    func(c *MemberConfig) { c.Roles = nil },
		"no topic":    func(c *MemberConfig) { c.CommandTopic = "" },
		"no ack log":  func(c *MemberConfig) { c.Acks = nil },
		"no interval": func(c *MemberConfig) { c.CommandInterval = 0 },
		// 2 roles × MaxInt32 partitions per role: more than Kafka's int32
		// partition field holds, which wrapped to negative partitions.
		"spread past int32": func(c *MemberConfig) { c.Roles, c.Spread = []string{"a", "b"}, math.MaxInt32 },
		"negative spread":   func(c *MemberConfig) { c.Spread = -1 },
	} {
		c := good
		edit(&c)
		if _, err := NewMember(c); err == nil {
			t.Errorf("NewMember(%s) = nil error; want an error", name)
		}
	}
}

// TestCommandPartitions: the leader of role i of n writes to i, i+n, ...,
// one partition per unit of spread; a role out of range, a negative
// spread and a topic past Kafka's int32 partition are errors.
func TestCommandPartitions(t *testing.T) {
	for _, c := range []struct {
		role, roles, spread int
		want                []int32
	}{
		{0, 1, 0, []int32{0}},
		{1, 3, 1, []int32{1}},
		{1, 3, 3, []int32{1, 4, 7}},
		{1<<20 - 1, 1 << 20, 2047, nil}, // 2047 × 2^20 partitions fit an int32; the last is 2^31 - 2^20 - 1
	} {
		got, err := CommandPartitions(c.role, c.roles, c.spread)
		if err != nil {
			t.Errorf("CommandPartitions(%d, %d, %d): %v", c.role, c.roles, c.spread, err)
			continue
		}
		if c.want != nil && !slices.Equal(got, c.want) {
			t.Errorf("CommandPartitions(%d, %d, %d) = %v, want %v", c.role, c.roles, c.spread, got, c.want)
		}
		if last := got[len(got)-1]; last < 0 || int(last) >= c.roles*max(c.spread, 1) {
			t.Errorf("CommandPartitions(%d, %d, %d): partition %d outside the topic's %d", c.role, c.roles, c.spread, last, c.roles*max(c.spread, 1))
		}
	}
	for _, c := range [][3]int{{0, 2, math.MaxInt32}, {0, 1 << 20, 2048}, {2, 2, 1}, {-1, 2, 1}, {0, 0, 1}, {0, 2, -1}} {
		if got, err := CommandPartitions(c[0], c[1], c[2]); err == nil {
			t.Errorf("CommandPartitions(%d, %d, %d) = %v, want an error", c[0], c[1], c[2], got)
		}
	}
}
