package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Procedures of a rolling restart ([OrchestrateRolling]).
const (
	// ProcedureTransfer restarts the standbys first, then the holder, which
	// hands the role to a member already restarted
	// (Leadership.TransferTo): docs/operations.md.
	ProcedureTransfer = "transfer"
	// ProcedureResign is the procedure before issue 31: every member in
	// roster order, the holder first, each holder resigning on its stop,
	// so the role moves to the first standby, which is restarted next.
	ProcedureResign = "resign"
)

// RollingConfig configures a rolling-restart run ([OrchestrateRolling]):
// members of one build on one role, restarted once each by every
// procedure in turn, with no fault.
type RollingConfig struct {
	// Brokers lists the bootstrap brokers, and Executable is the member
	// binary (krabka-chaos, whose "member" mode runs a [Member]).
	Brokers    []string
	Executable string

	// Members is the count of member processes (at least 2).
	Members int

	// The timings of a member, as in [RunConfig].
	Lease, Renew, Stagger, Poll   time.Duration
	CommandInterval, WriteTimeout time.Duration

	// Procedures lists the procedures to run, in order; nil runs
	// ProcedureTransfer, then ProcedureResign.
	Procedures []string

	// Hold is how long each step runs after the restarted member registered
	// again (and, after a restart of the holder, after the next holder took
	// the role), before the next step.
	Hold time.Duration

	// Dir is the run directory ([RunInfo]), and Progress receives a line per
	// step (nil discards them).
	Dir      string
	Progress io.Writer
}

// RollingStep is one restart of a rolling-restart run.
type RollingStep struct {
	Procedure string `json:"procedure"`
	Member    string `json:"member"`
	Holder    bool   `json:"holder"`

	// Successor is, for a holder, the member its stop handed the role to
	// (ProcedureTransfer: the member named; ProcedureResign: the next
	// holder seen).
	Successor string `json:"successor,omitempty"`

	// StopMillis is the host time of the SIGTERM, ExitMillis that of the
	// process's end, and RegisteredMillis the time its next incarnation's
	// registration was seen.
	StopMillis       int64 `json:"stop_ms"`
	ExitMillis       int64 `json:"exit_ms"`
	RegisteredMillis int64 `json:"registered_ms"`
}

// RollingPhase is the span of one procedure in a rolling-restart run.
type RollingPhase struct {
	Procedure   string `json:"procedure"`
	StartMillis int64  `json:"start_ms"`
	EndMillis   int64  `json:"end_ms"`
}

// RollingRun is the outcome of [OrchestrateRolling]: the run, which
// [CheckRun] checks like any other, its steps and the span of each
// procedure, which [MeasureRolling] reads.
type RollingRun struct {
	Info   *RunInfo
	Steps  []RollingStep
	Phases []RollingPhase
}

// OrchestrateRolling restarts every member of one role once per procedure
// (config.Procedures), each restart a SIGTERM, the end of the process and
// its next incarnation on the same binary, waiting until its registration
// is in the state topic. ProcedureTransfer restarts the standbys first, in
// roster order, then the holder, after writing the member restarted last
// into the holder's successor file (members/<id>.successor), which the
// member reads at its stop to hand the role over with
// Leadership.TransferTo (resigning when that fails). ProcedureResign
// restarts the members in roster order, the holder first: each holder
// resigns. Every member is stopped before it returns, whatever happens.
//
// It writes the files of a run ([RunInfo]), an empty nemesis log, and
// rolling.json (the steps and phases), so that [CheckRun] checks it.
func OrchestrateRolling(ctx context.Context, config RollingConfig) (*RollingRun, error) {
	if config.Executable == "" {
		return nil, errors.New("chaos: a rolling run needs the member binary")
	}
	if config.Members < 2 {
		return nil, errors.New("chaos: a rolling run needs at least 2 members")
	}
	procedures := config.Procedures
	if procedures == nil {
		procedures = []string{ProcedureTransfer, ProcedureResign}
	}
	for _, p := range procedures {
		if p != ProcedureTransfer && p != ProcedureResign {
			return nil, fmt.Errorf("chaos: unknown rolling procedure %q: want %s or %s", p, ProcedureTransfer, ProcedureResign)
		}
	}
	progress := config.Progress
	if progress == nil {
		progress = io.Discard
	}
	if err := os.MkdirAll(config.Dir+"/members", 0o755); err != nil {
		return nil, err
	}
	runID := fmt.Sprintf("rolling-%d", time.Now().UnixNano())
	roles, err := RoleNames(runID, 1, coordination.DefaultPartitions)
	if err != nil {
		return nil, err
	}
	discover, cancel := context.WithTimeout(ctx, 2*time.Minute)
	nodes, err := DiscoverBrokers(discover, config.Brokers, len(config.Brokers))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	info := &RunInfo{
		RunID: runID, Brokers: config.Brokers, Nodes: nodes,
		StateTopic: runID + ".state", StatePartitions: coordination.DefaultPartitions,
		CommandTopic: runID + ".commands", Roles: roles,
		Lease: config.Lease, Renew: config.Renew, Stagger: config.Stagger, Poll: config.Poll,
		CommandInterval: config.CommandInterval, WriteTimeout: config.WriteTimeout,
		Faults: []string{}, Slack: 2 * time.Second, Dir: config.Dir,
		// The resign procedure runs as krabka-coord elect and run do: the
		// first standby takes the role after a resignation.
		ResignationAnchor: true,
	}
	for i := range config.Members {
		info.Members = append(info.Members, fmt.Sprintf("m%d", i+1))
	}
	if err := WriteRunInfo(info); err != nil {
		return nil, err
	}
	setup, cancel := context.WithTimeout(ctx, 2*time.Minute)
	info.ReplicationFactor, err = CreateTopics(setup, info, 0)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("chaos: create the topics: %w", err)
	}
	nemesisLog, err := OpenLineLog(info.Path("nemesis.log"), nil)
	if err != nil {
		return nil, err
	}
	_ = nemesisLog.Close()
	lease, err := coordination.NewLeaseConfig(config.Lease, config.Renew, config.Stagger)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	reader, err := coordination.NewKafkaTransport(lease, addrs...)
	if err != nil {
		return nil, err
	}
	defer reader.Close()
	role, err := coordination.NewRole(roles[0])
	if err != nil {
		return nil, err
	}
	o := &Orchestrator{
		info: info,
		config: RunConfig{
			Brokers: config.Brokers, Members: config.Members, Roles: 1,
			Lease: config.Lease, Renew: config.Renew, Stagger: config.Stagger, Poll: config.Poll,
			CommandInterval: config.CommandInterval, WriteTimeout: config.WriteTimeout,
			Dir: config.Dir, Executable: config.Executable,
		},
		proxies:     make(map[string]*MemberNetwork),
		procs:       make(map[string]*proc),
		incarnation: make(map[string]int),
		leaders:     make(map[string]leaderView),
	}
	defer o.shutdown()
	for _, member := range info.Members {
		network, err := NewMemberNetwork(addrs)
		if err != nil {
			return nil, err
		}
		o.proxies[member] = network
		if err := WriteClockFile(info.MemberPath(member, "clock"), 0); err != nil {
			return nil, err
		}
	}
	m := &mixed{o: o, reader: reader, role: role, options: []coordination.Option{
		coordination.WithTopic(info.StateTopic), coordination.WithPartitions(info.StatePartitions)}, release: map[string]string{}}
	for _, member := range info.Members {
		if err := m.startOn(member, ReleaseNew, config.Executable); err != nil {
			return nil, err
		}
		// One at a time, so that the roster order is the member order.
		if _, err := awaitRegistration(ctx, m, member, -1, 30*time.Second); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(progress, "rolling run %s: %d members, role %s, dir %s\n", runID, config.Members, roles[0], config.Dir)
	if err := o.awaitLeaders(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	info.StartMillis = time.Now().UnixMilli()
	if err := WriteRunInfo(info); err != nil {
		return nil, err
	}
	run := &RollingRun{Info: info}
	for _, procedure := range procedures {
		phase := RollingPhase{Procedure: procedure, StartMillis: time.Now().UnixMilli()}
		holder, ok := o.LeaderOf(roles[0])
		if !ok {
			return run, fmt.Errorf("chaos: no holder of %s before the %s procedure", roles[0], procedure)
		}
		order, err := rosterOrder(ctx, m)
		if err != nil {
			return run, err
		}
		standbys := slices.DeleteFunc(slices.Clone(order), func(member string) bool { return member == holder })
		steps := append([]string{holder}, standbys...) // resign: the holder first, then each next holder
		if procedure == ProcedureTransfer {
			steps = append(standbys, holder)
		}
		done := map[string]bool{}
		for _, member := range steps {
			isHolder := false
			if current, ok := o.LeaderOf(roles[0]); ok && current == member {
				isHolder = true
			}
			successor := ""
			if isHolder && procedure == ProcedureTransfer {
				successor = lastRestarted(run.Steps, procedure, done)
			}
			step, err := rollOne(ctx, m, member, procedure, isHolder, successor, config)
			run.Steps = append(run.Steps, step)
			if err != nil {
				return run, err
			}
			done[member] = true
			fmt.Fprintf(progress, "%s: restarted %s (holder %v, successor %s)\n", procedure, member, step.Holder, step.Successor)
			if err := writeJSON(info.Path("rolling.json"), run); err != nil {
				return run, err
			}
		}
		phase.EndMillis = time.Now().UnixMilli()
		run.Phases = append(run.Phases, phase)
		if err := writeJSON(info.Path("rolling.json"), run); err != nil {
			return run, err
		}
	}
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

// lastRestarted is the member that the procedure restarted last, among
// those in done.
func lastRestarted(steps []RollingStep, procedure string, done map[string]bool) string {
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].Procedure == procedure && done[steps[i].Member] {
			return steps[i].Member
		}
	}
	return ""
}

// rosterOrder returns the members of the roster in rank order, the holder
// first.
func rosterOrder(ctx context.Context, m *mixed) ([]string, error) {
	read, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	state, err := coordination.DescribeRoleState(read, m.reader, m.role, m.options...)
	if err != nil {
		return nil, err
	}
	var order []string
	if holder, ok := state.Holder(); ok {
		order = append(order, holder.String())
	}
	for _, e := range state.Roster {
		if !slices.Contains(order, e.Member.String()) {
			order = append(order, e.Member.String())
		}
	}
	return order, nil
}

// awaitRegistration waits until the member's registration is in the state
// topic at an offset above before, and returns the instant it saw it.
func awaitRegistration(ctx context.Context, m *mixed, member string, before int64, timeout time.Duration) (int64, error) {
	deadline := time.Now().Add(timeout)
	for {
		offset, _, err := m.registration(ctx, member)
		if err != nil && ctx.Err() != nil {
			return 0, err
		}
		if err == nil && offset > before {
			return time.Now().UnixMilli(), nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return 0, fmt.Errorf("member %s did not register within %s (see %s; last error: %w)", member, timeout, m.o.info.MemberPath(member, "log"), err)
			}
			return 0, fmt.Errorf("member %s did not register within %s (see %s)", member, timeout, m.o.info.MemberPath(member, "log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rollOne restarts one member: for a holder with a successor it writes the
// successor file first, which the member reads at its stop.
func rollOne(ctx context.Context, m *mixed, member, procedure string, holder bool, successor string, config RollingConfig) (RollingStep, error) {
	step := RollingStep{Procedure: procedure, Member: member, Holder: holder}
	before, _, err := m.registration(ctx, member)
	if err != nil {
		return step, err
	}
	path := m.o.info.MemberPath(member, "successor")
	if successor != "" {
		if err := os.WriteFile(path, []byte(successor+"\n"), 0o644); err != nil {
			return step, err
		}
		defer os.Remove(path)
	}
	step.StopMillis = time.Now().UnixMilli()
	// A transfer waits for its bound at most, then resigns.
	if err := m.stop(member, 30*time.Second); err != nil {
		return step, err
	}
	step.ExitMillis = time.Now().UnixMilli()
	_ = os.Remove(path) // the next incarnation hands nothing over by it
	if err := m.startOn(member, ReleaseNew, config.Executable); err != nil {
		return step, err
	}
	if step.RegisteredMillis, err = awaitRegistration(ctx, m, member, before, 30*time.Second); err != nil {
		return step, err
	}
	if holder {
		deadline := time.Now().Add(2 * config.Lease)
		for {
			if next, ok := m.o.LeaderOf(m.role.String()); ok {
				step.Successor = next
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

// RollingPhaseReport is what [MeasureRolling] finds in one procedure's
// span.
type RollingPhaseReport struct {
	Procedure string `json:"procedure"`

	// Changes counts the changes of the leaseholder in the state topic
	// ([Handovers]) whose new lease is in the span; Epochs the epochs
	// minted for the role in it (the members' acquisitions).
	Changes int `json:"changes"`
	Epochs  int `json:"epochs"`

	// LongestGapMillis is the longest time between two acknowledged
	// commands of the role in the span, and CommandInterval the gap that
	// the leader's pace alone makes.
	LongestGapMillis int64 `json:"longest_gap_ms"`

	// HandoverGapMillis is the longest of the gaps across a stop of the
	// holder: from its last acknowledged command before the SIGTERM to the
	// first one after it, by any member. LongestGapMillis may be another
	// gap of the span (a slow write on a loaded machine).
	HandoverGapMillis int64 `json:"handover_gap_ms"`

	// TransferMillis lists the duration of each Leadership.TransferTo call
	// of the span (the holder's stop), from the members' call logs.
	TransferMillis []int64 `json:"transfer_ms"`
}

// String describes the report for a log.
func (r RollingPhaseReport) String() string {
	return fmt.Sprintf("%s: %d leadership changes, %d epochs, longest gap without an acknowledged command %d ms (%d ms across a stop of the holder), transfers %v ms",
		r.Procedure, r.Changes, r.Epochs, r.LongestGapMillis, r.HandoverGapMillis, r.TransferMillis)
}

// MeasureRolling reads a rolling run's state partition (read_committed),
// and its members' ack, event and call logs, and reports each procedure.
func MeasureRolling(ctx context.Context, run *RollingRun) ([]RollingPhaseReport, error) {
	info := run.Info
	role, err := coordination.NewRole(info.Roles[0])
	if err != nil {
		return nil, err
	}
	tp, err := coordination.RoleTopicPartition(role, coordination.WithTopic(info.StateTopic), coordination.WithPartitions(info.StatePartitions))
	if err != nil {
		return nil, err
	}
	read, err := ReadCommitted(ctx, info.Brokers, info.StateTopic, int32(tp.Partition), 30*time.Second) //nolint:gosec // a partition of the run's topic
	if err != nil {
		return nil, err
	}
	records := make([]coordination.StateRecord, len(read))
	for i, rec := range read {
		records[i] = coordination.StateRecord{Offset: rec.Offset, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp.UnixMilli()}
	}
	handovers, err := Handovers(role, records)
	if err != nil {
		return nil, err
	}
	logs, err := loadLogs(info)
	if err != nil {
		return nil, err
	}
	var acks []int64
	for _, a := range logs.acks {
		if a.Role == info.Roles[0] {
			acks = append(acks, a.AckMillis)
		}
	}
	slices.Sort(acks)
	var reports []RollingPhaseReport
	for _, phase := range run.Phases {
		in := func(ms int64) bool { return ms >= phase.StartMillis && ms <= phase.EndMillis }
		r := RollingPhaseReport{Procedure: phase.Procedure, TransferMillis: []int64{}}
		for _, h := range handovers {
			if in(h.LeaseMillis) {
				r.Changes++
			}
		}
		for _, ev := range logs.events {
			if ev.Kind == EventAcquired && ev.Role == info.Roles[0] && in(ev.WallMillis) {
				r.Epochs++
			}
		}
		for _, c := range logs.calls {
			if c.Call == CallTransfer && in(c.WallMillis) {
				r.TransferMillis = append(r.TransferMillis, c.TookMillis)
			}
		}
		prev := int64(-1)
		for _, at := range acks {
			if !in(at) {
				continue
			}
			if prev >= 0 {
				r.LongestGapMillis = max(r.LongestGapMillis, at-prev)
			}
			prev = at
		}
		for _, step := range run.Steps {
			if step.Procedure != phase.Procedure || !step.Holder {
				continue
			}
			i, _ := slices.BinarySearch(acks, step.StopMillis)
			if i > 0 && i < len(acks) {
				r.HandoverGapMillis = max(r.HandoverGapMillis, acks[i]-acks[i-1])
			}
		}
		reports = append(reports, r)
	}
	return reports, nil
}

// successorOf reads a member's successor file: the member that its stop
// hands its roles to, or "" when the file is absent or empty.
func successorOf(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// transferrer is Leadership.TransferTo, asked for by an interface so that
// the harness builds against an earlier release of the library too (the
// mixed-release test lays this harness over one).
type transferrer interface {
	TransferTo(ctx context.Context, to coordination.MemberID) error
}

// handOver hands the leadership to the successor on a stop, within the
// harness's bound, and reports whether it did; when it did not, the
// caller resigns.
func (m *Member) handOver(ctx context.Context, leadership *coordination.Leadership) bool {
	if m.config.Successor == nil {
		return false
	}
	name := m.config.Successor()
	if name == "" {
		return false
	}
	t, ok := any(leadership).(transferrer)
	if !ok {
		return false // an earlier release: no transfer
	}
	to, err := coordination.NewMemberID(name)
	if err != nil {
		return false
	}
	transfer, cancel := context.WithTimeout(context.WithoutCancel(ctx), 25*time.Second)
	defer cancel()
	role, token := leadership.Role().String(), leadership.Token().String()
	err = m.Timed(transfer, CallTransfer, role, func(ctx context.Context) error { return t.TransferTo(ctx, to) })
	if err != nil {
		return false // the call log has the error
	}
	m.event(Event{Kind: EventEnded, Role: role, Token: token, Error: "shutdown: transferred to " + name})
	return true
}
