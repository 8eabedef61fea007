package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// RunConfig configures a run of the orchestrator.
type RunConfig struct {
	// Brokers lists the bootstrap brokers. The orchestrator reads the
	// brokers of the cluster from their metadata, and every member reaches
	// each broker through a proxy of its own.
	Brokers []string

	// ReplicationFactor is the replication factor of the run's topics; 0
	// or less takes the cluster's default.replication.factor. The topics
	// take the cluster's min.insync.replicas.
	ReplicationFactor int

	// Members and Roles are the counts of member processes and of roles.
	Members, Roles int

	// Duration is the length of the fault phase, and Seed seeds its
	// schedule.
	Duration time.Duration
	Seed     int64

	// The timings of a member.
	Lease, Renew, Stagger, Poll time.Duration
	// Heartbeat switches the members' heartbeats on at this interval
	// (coordination.WithHeartbeatInterval); zero runs the specification's
	// defaults, without heartbeats.
	Heartbeat time.Duration
	// RivalWatch switches the members' rival-mint watch on
	// (coordination.WithRivalMintWatch).
	RivalWatch                    bool
	CommandInterval, WriteTimeout time.Duration
	// Spread is the number of partitions of the command topic per role;
	// 2 or more makes each command a Write of 2 or 3 records over them
	// (see [MemberConfig].Spread).
	Spread int

	// Faults lists the fault kinds; MeanGap is the mean gap between two
	// faults, MaxSkew the largest clock offset, BrokerRestartEvery the
	// window of one broker restart, and BrokerRestartCmd the shell command
	// that restarts the broker.
	Faults             []string
	MeanGap, MaxSkew   time.Duration
	BrokerRestartEvery time.Duration
	BrokerRestartCmd   string

	// ClusterCmd is the cluster command of a multi-broker cluster
	// (scripts/kafka-cluster.sh), which the cluster faults need, and
	// ClusterFaultEvery the window of one cluster fault.
	ClusterCmd        string
	ClusterFaultEvery time.Duration
	ClusterHold       time.Duration // see [PlanConfig].ClusterHold

	// ClusterDir is the run directory of that cluster (KRABKA_CLUSTER_DIR),
	// whose node logs the checker reads; see [RunInfo].ClusterDir.
	ClusterDir string

	// RequestKeys lists the API keys of the request faults, and RequestGap
	// is the mean gap between two of them (see [PlanConfig]).
	RequestKeys []int16
	RequestGap  time.Duration

	// MixedFaults lets the member faults overlap the cluster faults (see
	// [Nemesis].Mixed).
	MixedFaults bool

	// Slack is the extra time a failover may take past its bound.
	Slack time.Duration

	// Dir is the run directory; Executable is the path of the binary whose
	// "member" mode runs a member.
	Dir, Executable string

	// Progress receives a line for each phase of the run, and nil discards
	// them.
	Progress io.Writer
}

// roleNames are the base names of the roles, in order.
var roleNames = []string{"controller", "archiver", "scheduler", "dispatcher", "auditor", "reconciler"}

// RoleNames returns the roles of a run: a base name for each, with the run
// id in front so that a run never shares a transactional id with another
// user of the broker. Every role after the first carries the smallest
// suffix that puts it on the partition of the state topic of the first, so
// that the roles share one partition as "controller" and "archiver" do.
func RoleNames(runID string, count, partitions int) ([]string, error) {
	var out []string
	first := -1
	for i := range count {
		base := fmt.Sprintf("role%d", i)
		if i < len(roleNames) {
			base = roleNames[i]
		}
		for k := 0; ; k++ {
			name := runID + "." + base
			if k > 0 {
				name += "-" + strconv.Itoa(k)
			}
			role, err := coordination.NewRole(name)
			if err != nil {
				return nil, err
			}
			p, err := coordination.RolePartition(role, partitions)
			if err != nil {
				return nil, err
			}
			if first < 0 {
				first = p
			}
			if p == first {
				out = append(out, name)
				break
			}
		}
	}
	return out, nil
}

// Orchestrator runs the member processes of one run and implements
// [Actions] over them.
type Orchestrator struct {
	info    *RunInfo
	config  RunConfig
	proxies map[string]*MemberNetwork
	cluster *ClusterControl

	mu          sync.Mutex
	procs       map[string]*proc
	incarnation map[string]int
	leaders     map[string]leaderView // role -> leader
	changedAt   time.Time             // the last acquisition of any role

	wg sync.WaitGroup // one goroutine per member process
}

type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
}

type leaderView struct {
	member string
	token  coordination.FencingToken
}

var (
	_ Actions        = (*Orchestrator)(nil)
	_ BrokerCutter   = (*Orchestrator)(nil)
	_ RequestFaulter = (*Orchestrator)(nil)
)

// Orchestrate runs the whole fault phase of a run: it creates the topics,
// starts a proxy and a process for each member, waits until every role has
// a leader, plays the fault schedule for the duration, heals every fault,
// lets the last failovers finish, and stops the members. It returns the
// description of the run, which [LoadCheckInput] reads.
//
// Every member process is killed before Orchestrate returns, whatever
// happens; a member that outlives a killed orchestrator dies of its parent's
// death (Pdeathsig) or of the end of its standard input.
func Orchestrate(ctx context.Context, config RunConfig) (*RunInfo, error) {
	if len(config.Brokers) == 0 {
		return nil, errors.New("chaos: no brokers")
	}
	if config.Members < 2 || config.Roles < 1 {
		return nil, errors.New("chaos: want at least 2 members and 1 role")
	}
	progress := config.Progress
	if progress == nil {
		progress = io.Discard
	}
	if err := os.MkdirAll(config.Dir+"/members", 0o755); err != nil {
		return nil, err
	}
	runID := fmt.Sprintf("chaos-%d-%d", time.Now().Unix(), config.Seed)
	roles, err := RoleNames(runID, config.Roles, coordination.DefaultPartitions)
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
		RunID:           runID,
		Seed:            config.Seed,
		Brokers:         config.Brokers,
		Nodes:           nodes,
		StateTopic:      runID + ".state",
		StatePartitions: coordination.DefaultPartitions,
		CommandTopic:    runID + ".commands",
		CommandSpread:   config.Spread,
		Roles:           roles,
		Lease:           config.Lease,
		Renew:           config.Renew,
		Stagger:         config.Stagger,
		Poll:            config.Poll,
		Heartbeat:       config.Heartbeat,
		RivalWatch:      config.RivalWatch,
		CommandInterval: config.CommandInterval,
		WriteTimeout:    config.WriteTimeout,
		Faults:          config.Faults,
		MaxSkew:         config.MaxSkew,
		Slack:           config.Slack,
		ClusterDir:      config.ClusterDir,
		Dir:             config.Dir,
	}
	for i := range config.Members {
		info.Members = append(info.Members, fmt.Sprintf("m%d", i+1))
	}
	plan, err := NewPlan(PlanConfig{
		Seed: config.Seed, Duration: config.Duration, Members: config.Members, Roles: config.Roles,
		Faults: config.Faults, Lease: config.Lease, MeanGap: config.MeanGap, MaxSkew: config.MaxSkew,
		BrokerRestartEvery: config.BrokerRestartEvery,
		ClusterFaultEvery:  config.ClusterFaultEvery, Nodes: len(nodes), ClusterHold: config.ClusterHold,
		RequestKeys: config.RequestKeys, RequestGap: config.RequestGap,
	})
	if err != nil {
		return nil, err
	}
	if slices.Contains(config.Faults, FaultBrokerRestart) && config.BrokerRestartCmd == "" {
		return nil, errors.New("chaos: the broker-restart fault needs --broker-restart-cmd")
	}
	for _, kind := range config.Faults {
		if slices.Contains(ClusterFaults, kind) && config.ClusterCmd == "" {
			return nil, fmt.Errorf("chaos: the %s fault needs --cluster-cmd (scripts/kafka-cluster.sh)", kind)
		}
	}
	planJSON, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(info.Path("plan.json"), planJSON, 0o644); err != nil {
		return nil, err
	}
	if err := WriteRunInfo(info); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "run %s: %d members, roles %v, %d planned faults, dir %s\n", runID, config.Members, roles, len(plan), config.Dir)

	setup, cancel := context.WithTimeout(ctx, 2*time.Minute)
	info.ReplicationFactor, err = CreateTopics(setup, info, config.ReplicationFactor)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("chaos: create the topics: %w", err)
	}
	if err := WriteRunInfo(info); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "brokers %v; topics with replication factor %d\n", nodes, info.ReplicationFactor)

	o := &Orchestrator{
		info: info, config: config,
		proxies:     make(map[string]*MemberNetwork),
		procs:       make(map[string]*proc),
		incarnation: make(map[string]int),
		leaders:     make(map[string]leaderView),
	}
	defer o.shutdown()
	var clusterActions ClusterActions
	if config.ClusterCmd != "" {
		role, err := coordination.NewRole(roles[0])
		if err != nil {
			return nil, err
		}
		statePartition, err := coordination.RolePartition(role, info.StatePartitions)
		if err != nil {
			return nil, err
		}
		clusterLog, err := os.OpenFile(info.Path("cluster.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer clusterLog.Close()
		o.cluster = &ClusterControl{
			Command: config.ClusterCmd, Nodes: nodes,
			Topics:     []string{info.StateTopic, info.CommandTopic},
			StateTopic: info.StateTopic, StatePartition: int32(statePartition), //nolint:gosec // RolePartition's answer, below the topic's partition count
			Log: clusterLog,
		}
		defer o.cluster.Close()
		clusterActions = o.cluster
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	mintLog, err := OpenLineLog(info.Path("mints.log"), nil)
	if err != nil {
		return nil, err
	}
	defer mintLog.Close()
	for _, member := range info.Members {
		network, err := NewMemberNetwork(addrs)
		if err != nil {
			return nil, err
		}
		o.proxies[member] = network
		network.OnMint(member, func(m Mint) { _ = mintLog.Append(m) }) // a lost line only costs an attribution
		if err := WriteClockFile(info.MemberPath(member, "clock"), 0); err != nil {
			return nil, err
		}
	}
	for _, member := range info.Members {
		if err := o.start(member); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(progress, "members started; waiting for a leader of every role\n")
	if err := o.awaitLeaders(ctx, 2*time.Minute); err != nil {
		return nil, err
	}

	nemesisLog, err := OpenLineLog(info.Path("nemesis.log"), nil)
	if err != nil {
		return nil, err
	}
	defer nemesisLog.Close()
	start := time.Now()
	info.StartMillis = start.UnixMilli()
	if err := WriteRunInfo(info); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "fault phase: %s from %s\n", config.Duration, start.UTC().Format(time.TimeOnly))
	phase, cancel := context.WithDeadline(ctx, start.Add(config.Duration))
	check := CheckConfig{Members: config.Members, Lease: config.Lease, Stagger: config.Stagger, Slack: config.Slack}
	faults := (&Nemesis{
		Steps: plan, Members: info.Members, Roles: roles, Actions: o, Log: nemesisLog,
		MaxDown: max(1, (config.Members-1)/2),
		// The quiet time outlasts the tail of a fault's window (one
		// failover bound) a little, so that two windows never touch.
		Cluster: clusterActions, Quiet: check.FailoverBound() + 2*time.Second, Mixed: config.MixedFaults,
	}).Run(phase, start)
	cancel()
	fmt.Fprintf(progress, "fault phase over: %d faults; letting the last failovers finish\n", len(faults))

	settle := check.FailoverBound() + 2*config.MaxSkew
	select {
	case <-ctx.Done():
	case <-time.After(settle):
	}
	info.EndMillis = time.Now().UnixMilli()
	o.shutdown()
	if err := WriteRunInfo(info); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "members stopped\n")
	return info, nil
}

// start starts the next incarnation of a member.
func (o *Orchestrator) start(member string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.incarnation[member]++
	inc := o.incarnation[member]
	stderr, err := os.OpenFile(o.info.MemberPath(member, "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer stderr.Close()
	cmd := exec.Command(o.config.Executable, "member",
		"--dir", o.info.Dir, "--id", member, "--inc", strconv.Itoa(inc), "--proxy", o.proxies[member].Routes().String())
	cmd.Stderr = stderr
	// The member dies with the orchestrator; it stays in the orchestrator's
	// process group, so a kill of that group takes every member too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	o.procs[member] = p
	o.wg.Go(func() {
		defer close(p.exited)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			var ev Event
			if json.Unmarshal(scanner.Bytes(), &ev) == nil {
				o.observe(ev)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	})
	return nil
}

// observe follows the leaders through the events of the members.
func (o *Orchestrator) observe(ev Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.Kind {
	case EventAcquired:
		token, err := coordination.ParseFencingToken(ev.Token)
		if err != nil {
			return
		}
		// The latest acquisition names the leader: tokens carry no order
		// across producer ids (FencingToken.Compare is no test of which
		// mint is newer), and the events arrive as they happen.
		o.leaders[ev.Role] = leaderView{member: ev.Member, token: token}
		o.changedAt = time.Now()
	case EventFenced, EventEnded:
		if current, ok := o.leaders[ev.Role]; ok && current.member == ev.Member && current.token.String() == ev.Token {
			delete(o.leaders, ev.Role)
		}
	}
}

// awaitLeaders waits until every role has a leader and no role has
// changed hands for one lease: the members that started together may
// challenge at once, and the fault phase begins on settled leaderships, so
// that a change in it is the doing of a fault or a needless failover.
func (o *Orchestrator) awaitLeaders(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		o.mu.Lock()
		n, settled := len(o.leaders), time.Since(o.changedAt) >= o.config.Lease
		o.mu.Unlock()
		if n == len(o.info.Roles) && settled {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: no leader for every role after %s: see %s", timeout, o.info.Path("members"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// shutdown stops every member (SIGCONT, SIGTERM, and SIGKILL after ten
// seconds), waits for their goroutines, and closes the proxies. It is
// idempotent.
func (o *Orchestrator) shutdown() {
	for _, network := range o.proxies {
		network.Heal()
	}
	o.mu.Lock()
	procs := make([]*proc, 0, len(o.procs))
	for member, p := range o.procs {
		procs = append(procs, p)
		delete(o.procs, member)
	}
	o.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		_ = p.stdin.Close()
	}
	o.wg.Wait()
	var counts []RequestCount
	for member, network := range o.proxies {
		counts = append(counts, network.Requests()...)
		network.Close()
		delete(o.proxies, member)
	}
	if len(counts) > 0 {
		// The requests of the run by API key and version, which
		// docs/safety.md lists; a failed write loses only that table.
		if data, err := json.MarshalIndent(SumRequests(counts), "", "  "); err == nil {
			_ = os.WriteFile(o.info.Path("requests.json"), append(data, '\n'), 0o644)
		}
	}
}

func (o *Orchestrator) process(member string) (*proc, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.procs[member]
	if p == nil {
		return nil, fmt.Errorf("member %s has no process", member)
	}
	return p, nil
}

func (o *Orchestrator) signal(member string, sig syscall.Signal) error {
	p, err := o.process(member)
	if err != nil {
		return err
	}
	return p.cmd.Process.Signal(sig)
}

// Pause sends SIGSTOP to the member.
func (o *Orchestrator) Pause(member string) error { return o.signal(member, syscall.SIGSTOP) }

// Resume sends SIGCONT to the member.
func (o *Orchestrator) Resume(member string) error { return o.signal(member, syscall.SIGCONT) }

// Kill sends SIGKILL to the member and waits for its end.
func (o *Orchestrator) Kill(member string) error {
	p, err := o.process(member)
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	<-p.exited
	_ = p.stdin.Close()
	o.mu.Lock()
	delete(o.procs, member)
	for role, leader := range o.leaders {
		if leader.member == member {
			delete(o.leaders, role)
		}
	}
	o.mu.Unlock()
	return nil
}

// Restart starts the next incarnation of a killed member.
func (o *Orchestrator) Restart(member string) error { return o.start(member) }

// Cut cuts the member's proxies, one for each broker.
func (o *Orchestrator) Cut(member string, mode CutMode) error {
	o.proxies[member].Cut(mode)
	return nil
}

// CutBroker cuts every member's proxy of the node.
func (o *Orchestrator) CutBroker(node int32, mode CutMode) error {
	addr, err := o.nodeAddr(node)
	if err != nil {
		return err
	}
	for member, network := range o.proxies {
		if !network.CutBroker(addr, mode) {
			return fmt.Errorf("member %s has no proxy of node %d (%s)", member, node, addr)
		}
	}
	return nil
}

// HealBroker heals every member's proxy of the node; a member cut as a
// whole at the time stays cut (the nemesis never mixes the two unless
// told to).
func (o *Orchestrator) HealBroker(node int32) error {
	addr, err := o.nodeAddr(node)
	if err != nil {
		return err
	}
	for _, network := range o.proxies {
		network.HealBroker(addr)
	}
	return nil
}

func (o *Orchestrator) nodeAddr(node int32) (string, error) {
	for _, n := range o.info.Nodes {
		if n.ID == node {
			return n.Addr, nil
		}
	}
	return "", fmt.Errorf("no node %d in %v", node, o.info.Nodes)
}

// ArmRequest arms a request fault on the member's proxies.
func (o *Orchestrator) ArmRequest(member string, fault RequestFault) (*ArmedRequest, error) {
	network, ok := o.proxies[member]
	if !ok {
		return nil, fmt.Errorf("member %s has no proxies", member)
	}
	return network.Arm(fault), nil
}

// Heal heals the member's proxies.
func (o *Orchestrator) Heal(member string) error {
	o.proxies[member].Heal()
	return nil
}

// Skew writes the member's clock file.
func (o *Orchestrator) Skew(member string, millis int64) error {
	return WriteClockFile(o.info.MemberPath(member, "clock"), millis)
}

// RestartBroker runs the restart command in a process group of its own, so
// that the broker it starts outlives the run, and waits for it.
func (o *Orchestrator) RestartBroker(ctx context.Context) error {
	log, err := os.OpenFile(o.info.Path("broker-restart.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", o.config.BrokerRestartCmd)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("broker restart command: %w (see %s)", err, o.info.Path("broker-restart.log"))
	}
	return nil
}

// LeaderOf returns the leader of the role as the member events tell it.
func (o *Orchestrator) LeaderOf(role string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	leader, ok := o.leaders[role]
	return leader.member, ok
}

// RolesOf returns the roles the member leads as the member events tell it.
func (o *Orchestrator) RolesOf(member string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, role := range o.info.Roles {
		if o.leaders[role].member == member {
			out = append(out, role)
		}
	}
	return out
}
