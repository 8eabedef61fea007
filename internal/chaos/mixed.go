package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// MixedConfig configures a mixed-release run ([OrchestrateMixed]): members
// of two builds of the member binary (krabka-chaos, whose "member" mode
// runs a [Member]) share one role and one state topic through a rolling
// upgrade and a rollback, with no fault.
type MixedConfig struct {
	// Brokers lists the bootstrap brokers.
	Brokers []string

	// Old and New are the paths of the member binaries of the previous
	// release and of this one. Every member starts on Old.
	Old, New string

	// Members is the count of member processes (at least 2).
	Members int

	// The timings of a member, as in [RunConfig].
	Lease, Renew, Stagger, Poll   time.Duration
	CommandInterval, WriteTimeout time.Duration

	// ResignationAnchor runs the members with
	// coordination.WithResignationAnchor. Without it (the specification's
	// rule 3), a resignation finds every standby's registration long past,
	// so every standby challenges at once, and a rolling restart's handover
	// may change hands twice within a few hundred milliseconds (fenced,
	// safe, one epoch more).
	ResignationAnchor bool

	// Transfer makes the rollback's restart of the holder (a member of
	// this release, every other one back on the previous release) a
	// planned transfer (Leadership.TransferTo, issue 31) to the last
	// standby of the roster instead of a resignation: the target and the
	// bystander run the previous release. The holder learns its target
	// from its successor file, as in the rolling-restart run
	// (MemberConfig.Successor).
	Transfer bool

	// Hold is how long each step runs, after the restarted member
	// registered again (and, after a restart of the holder, after the next
	// holder took the role), before the next step.
	Hold time.Duration

	// Dir is the run directory ([RunInfo]), and Progress receives a line per
	// step (nil discards them).
	Dir      string
	Progress io.Writer
}

// Releases of a [MixedStep].
const (
	ReleaseOld = "old"
	ReleaseNew = "new"
)

// MixedStep is one restart of a mixed-release run: a member stopped with
// SIGTERM (so a holder resigns: a lease tombstone), and started again on the
// other release.
type MixedStep struct {
	// Phase is "upgrade" (old to new) or "rollback" (new to old).
	Phase string `json:"phase"`

	// Member is the member restarted, and From and To its releases before
	// and after.
	Member string `json:"member"`
	From   string `json:"from"`
	To     string `json:"to"`

	// Holder reports that the member held the role when it was stopped;
	// Successor is then the member that took the role next, and
	// SuccessorRelease the release it ran.
	Holder           bool   `json:"holder"`
	Successor        string `json:"successor,omitempty"`
	SuccessorRelease string `json:"successor_release,omitempty"`

	// FirstStandby is, for a holder, the first member after it in the
	// roster read just before its stop: the member a handover in rank order
	// gives the role to.
	FirstStandby string `json:"first_standby,omitempty"`

	// TransferTo is, for a holder stopped with a planned transfer
	// ([MixedConfig.Transfer]), the member it named: the last standby of
	// the roster read just before its stop.
	TransferTo string `json:"transfer_to,omitempty"`

	// StopMillis is the host time of the SIGTERM, ExitMillis that of the
	// process's end, and RegisteredMillis the time the new process's
	// registration was seen in the state topic, at an offset above its
	// previous one.
	StopMillis       int64 `json:"stop_ms"`
	ExitMillis       int64 `json:"exit_ms"`
	RegisteredMillis int64 `json:"registered_ms"`
}

// MixedRun is the outcome of [OrchestrateMixed]: the run, which [CheckRun]
// checks like any other, and its steps.
type MixedRun struct {
	// Info describes the run; its StartMillis is the instant the first
	// leadership had settled, before the first restart.
	Info *RunInfo

	// Steps lists the restarts in their order.
	Steps []MixedStep
}

// OrchestrateMixed runs a rolling upgrade and a rollback on one role. It
// creates the run's topics, starts every member on config.Old, and waits
// for a settled leader. The upgrade then restarts each member on
// config.New, one at a time, the holder last; the rollback restarts each
// on config.Old again, the holder last. A restart stops the member with
// SIGTERM (a holder resigns), waits for its end, starts it on the other
// binary and waits until its new registration is in the state topic; after
// the holder's restart it also waits for the next holder. Every member is
// stopped before it returns, whatever happens.
//
// It writes the files of a run ([RunInfo]), an empty nemesis log, and
// mixed.json (the steps), so that [CheckRun] checks it.
func OrchestrateMixed(ctx context.Context, config MixedConfig) (*MixedRun, error) {
	if config.Old == "" || config.New == "" {
		return nil, errors.New("chaos: a mixed run needs the old and the new member binary")
	}
	if config.Members < 2 {
		return nil, errors.New("chaos: a mixed run needs at least 2 members")
	}
	progress := config.Progress
	if progress == nil {
		progress = io.Discard
	}
	m, stop, err := singleRoleRun{Kind: "mixed", Brokers: config.Brokers, Members: config.Members,
		Lease: config.Lease, Renew: config.Renew, Stagger: config.Stagger, Poll: config.Poll,
		CommandInterval: config.CommandInterval, WriteTimeout: config.WriteTimeout,
		Dir: config.Dir, Executable: config.Old, ResignationAnchor: config.ResignationAnchor}.start(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	o, info := m.o, m.o.info
	runID, roles := info.RunID, info.Roles
	for _, member := range info.Members {
		if err := m.startOn(member, ReleaseOld, config.Old); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(progress, "mixed run %s: %d members on the old release, role %s, dir %s\n", runID, config.Members, roles[0], config.Dir)
	if err := o.awaitLeaders(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	info.StartMillis = time.Now().UnixMilli()
	if err := WriteRunInfo(info); err != nil {
		return nil, err
	}

	run := &MixedRun{Info: info}
	for _, phase := range []struct {
		name, to, binary string
	}{
		{"upgrade", ReleaseNew, config.New},
		{"rollback", ReleaseOld, config.Old},
	} {
		holder, ok := o.LeaderOf(roles[0])
		if !ok {
			return run, fmt.Errorf("chaos: no holder of %s before the %s", roles[0], phase.name)
		}
		order := slices.DeleteFunc(slices.Clone(info.Members), func(member string) bool { return member == holder })
		for _, member := range append(order, holder) {
			step, err := m.restart(ctx, member, phase.name, phase.to, phase.binary, member == holder, config)
			run.Steps = append(run.Steps, step)
			if err != nil {
				return run, err
			}
			fmt.Fprintf(progress, "%s: %s %s -> %s (holder %v, successor %s on %s)\n",
				phase.name, member, step.From, step.To, step.Holder, step.Successor, step.SuccessorRelease)
			if err := writeJSON(info.Path("mixed.json"), run.Steps); err != nil {
				return run, err
			}
		}
	}
	// A last lease of quiet, so that the last holder's commands are in the
	// log and no change is under way, then the end.
	select {
	case <-ctx.Done():
		return run, ctx.Err()
	case <-time.After(config.Lease):
	}
	info.EndMillis = time.Now().UnixMilli()
	o.shutdown()
	if err := WriteRunInfo(info); err != nil {
		return run, err
	}
	return run, nil
}

// mixed carries out the steps of a mixed-release run on an [Orchestrator].
type mixed struct {
	o       *Orchestrator
	reader  *coordination.KafkaTransport
	role    coordination.Role
	options []coordination.Option
	release map[string]string // member -> the release it runs now
}

// startOn starts the member's next incarnation on the binary of a release.
// The orchestrator starts the binary of its config, which only this
// goroutine changes, under the orchestrator's lock.
func (m *mixed) startOn(member, release, binary string) error {
	m.o.mu.Lock()
	m.o.config.Executable = binary
	m.o.mu.Unlock()
	if err := m.o.start(member); err != nil {
		return err
	}
	m.release[member] = release
	return nil
}

// stop sends SIGTERM to the member and waits for its end: the member
// resigns a leadership it holds (Member.lead) and exits.
func (m *mixed) stop(member string, timeout time.Duration) error {
	p, err := m.o.process(member)
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.exited:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("member %s did not exit within %s of SIGTERM; killed", member, timeout)
	}
	_ = p.stdin.Close()
	m.o.mu.Lock()
	delete(m.o.procs, member)
	for role, leader := range m.o.leaders {
		if leader.member == member {
			delete(m.o.leaders, role) // a process that ended holds nothing
		}
	}
	m.o.mu.Unlock()
	return nil
}

// registration returns the offset of the member's registration in the
// state topic, and -1 when it has none, and the first other member of the
// roster ("" when there is none).
func (m *mixed) registration(ctx context.Context, member string) (offset int64, first string, err error) {
	id, err := coordination.NewMemberID(member)
	if err != nil {
		return 0, "", err
	}
	read, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	state, err := coordination.DescribeRoleState(read, m.reader, m.role, m.options...)
	if err != nil {
		return 0, "", err
	}
	offset = -1
	for _, entry := range state.Roster {
		switch {
		case entry.Member == id:
			offset = entry.Offset
		case first == "":
			first = entry.Member.String()
		}
	}
	return offset, first, nil
}

// lastStandby returns the last member of the roster other than member,
// "" when there is none: the target of a planned transfer that passes the
// first standby over.
func (m *mixed) lastStandby(ctx context.Context, member string) (string, error) {
	read, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	state, err := coordination.DescribeRoleState(read, m.reader, m.role, m.options...)
	if err != nil {
		return "", err
	}
	last := ""
	for _, entry := range state.Roster {
		if entry.Member.String() != member {
			last = entry.Member.String()
		}
	}
	return last, nil
}

// restart stops the member and starts it on the binary of another release;
// see [OrchestrateMixed].
func (m *mixed) restart(ctx context.Context, member, phase, to, binary string, holder bool, config MixedConfig) (MixedStep, error) {
	step := MixedStep{Phase: phase, Member: member, From: m.release[member], To: to, Holder: holder}
	before, first, err := m.registration(ctx, member)
	if err != nil {
		return step, err
	}
	if holder {
		step.FirstStandby = first
	}
	transferFile := m.o.info.MemberPath(member, "successor") // the member reads it at its stop (MemberConfig.Successor, rolling.go)
	if holder && config.Transfer && phase == "rollback" {
		last, err := m.lastStandby(ctx, member)
		if err != nil {
			return step, err
		}
		step.TransferTo = last
		if err := os.WriteFile(transferFile, []byte(last+"\n"), 0o644); err != nil {
			return step, err
		}
	}
	step.StopMillis = time.Now().UnixMilli()
	err = m.stop(member, 10*time.Second)
	_ = os.Remove(transferFile) // the next incarnation resigns
	if err != nil {
		return step, err
	}
	step.ExitMillis = time.Now().UnixMilli()
	if err := m.startOn(member, to, binary); err != nil {
		return step, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		offset, _, err := m.registration(ctx, member)
		if err != nil && ctx.Err() != nil {
			return step, err
		}
		if err == nil && offset > before {
			step.RegisteredMillis = time.Now().UnixMilli()
			break
		}
		if time.Now().After(deadline) {
			if err != nil {
				return step, fmt.Errorf("the %s incarnation of member %s did not register within 30 s (see %s; last error: %w)",
					to, member, m.o.info.MemberPath(member, "log"), err)
			}
			return step, fmt.Errorf("the %s incarnation of member %s did not register within 30 s (see %s; its registration is at offset %d, -1 for none, not after the old incarnation's %d)",
				to, member, m.o.info.MemberPath(member, "log"), offset, before)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if holder {
		deadline := time.Now().Add(2 * config.Lease)
		for {
			if next, ok := m.o.LeaderOf(m.role.String()); ok {
				step.Successor, step.SuccessorRelease = next, m.release[next]
				break
			}
			if time.Now().After(deadline) {
				return step, fmt.Errorf("no member took %s within %s of the holder's restart", m.role, 2*config.Lease)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	select {
	case <-ctx.Done():
		return step, ctx.Err()
	case <-time.After(config.Hold):
	}
	return step, nil
}

// writeJSON writes v as indented JSON to path.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// singleRoleRun is what a run of members on one role without a nemesis
// (the mixed-release run, the rolling restart) sets up alike: its topics,
// run info and member networks, the reader of the role's state, and the
// orchestrator that starts the members.
type singleRoleRun struct {
	Kind                          string // the run id's prefix: "mixed", "rolling"
	Brokers                       []string
	Members                       int
	Lease, Renew, Stagger, Poll   time.Duration
	CommandInterval, WriteTimeout time.Duration
	Dir, Executable               string
	ResignationAnchor             bool
}

// start sets the run up; the returned func closes the reader and shuts the
// orchestrator down, and the caller defers it.
func (s singleRoleRun) start(ctx context.Context) (*mixed, func(), error) {
	if err := os.MkdirAll(s.Dir+"/members", 0o755); err != nil {
		return nil, nil, err
	}
	runID := fmt.Sprintf("%s-%d", s.Kind, time.Now().UnixNano())
	roles, err := RoleNames(runID, 1, coordination.DefaultPartitions)
	if err != nil {
		return nil, nil, err
	}
	discover, cancel := context.WithTimeout(ctx, 2*time.Minute)
	nodes, err := DiscoverBrokers(discover, s.Brokers, len(s.Brokers))
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: %w", err)
	}
	info := &RunInfo{
		RunID: runID, Brokers: s.Brokers, Nodes: nodes,
		StateTopic: runID + ".state", StatePartitions: coordination.DefaultPartitions,
		CommandTopic: runID + ".commands", Roles: roles,
		Lease: s.Lease, Renew: s.Renew, Stagger: s.Stagger, Poll: s.Poll,
		CommandInterval: s.CommandInterval, WriteTimeout: s.WriteTimeout,
		Faults: []string{}, Slack: 2 * time.Second, Dir: s.Dir,
		ResignationAnchor: s.ResignationAnchor,
	}
	for i := range s.Members {
		info.Members = append(info.Members, fmt.Sprintf("m%d", i+1))
	}
	if err := WriteRunInfo(info); err != nil {
		return nil, nil, err
	}
	setup, cancel := context.WithTimeout(ctx, 2*time.Minute)
	info.ReplicationFactor, err = CreateTopics(setup, info, 0)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: create the topics: %w", err)
	}
	nemesisLog, err := OpenLineLog(info.Path("nemesis.log"), nil)
	if err != nil {
		return nil, nil, err
	}
	_ = nemesisLog.Close()
	lease, err := coordination.NewLeaseConfig(s.Lease, s.Renew, s.Stagger)
	if err != nil {
		return nil, nil, err
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	role, err := coordination.NewRole(roles[0])
	if err != nil {
		return nil, nil, err
	}
	reader, err := coordination.NewKafkaTransport(lease, addrs...)
	if err != nil {
		return nil, nil, err
	}
	o := &Orchestrator{
		info: info,
		config: RunConfig{
			Brokers: s.Brokers, Members: s.Members, Roles: 1,
			Lease: s.Lease, Renew: s.Renew, Stagger: s.Stagger, Poll: s.Poll,
			CommandInterval: s.CommandInterval, WriteTimeout: s.WriteTimeout,
			Dir: s.Dir, Executable: s.Executable,
		},
		proxies:     make(map[string]*MemberNetwork),
		procs:       make(map[string]*proc),
		incarnation: make(map[string]int),
		leaders:     make(map[string]leaderView),
	}
	stop := func() {
		o.shutdown()
		reader.Close()
	}
	for _, member := range info.Members {
		network, err := NewMemberNetwork(addrs)
		if err != nil {
			stop()
			return nil, nil, err
		}
		o.proxies[member] = network
		if err := WriteClockFile(info.MemberPath(member, "clock"), 0); err != nil {
			stop()
			return nil, nil, err
		}
	}
	m := &mixed{o: o, reader: reader, role: role, options: []coordination.Option{
		coordination.WithTopic(info.StateTopic), coordination.WithPartitions(info.StatePartitions)}, release: map[string]string{}}
	return m, stop, nil
}
