package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Actions is what the nemesis does to a run. The orchestrator implements it
// over member processes, their proxies, their clock files and the broker's
// restart command; a test implements it over anything.
type Actions interface {
	// Pause stops the member process (SIGSTOP), and Resume continues it.
	Pause(member string) error
	Resume(member string) error

	// Kill kills the member process (SIGKILL) and waits for its end, and
	// Restart starts the next incarnation under the same member id.
	Kill(member string) error
	Restart(member string) error

	// Cut cuts the member off the broker, and Heal ends the cut.
	Cut(member string, mode CutMode) error
	Heal(member string) error

	// Skew sets the clock offset of the member, in milliseconds.
	Skew(member string, millis int64) error

	// RestartBroker restarts the broker and returns when it is ready.
	RestartBroker(ctx context.Context) error

	// LeaderOf returns the member that leads the role as the orchestrator
	// sees it now, and the roles that a member leads.
	LeaderOf(role string) (string, bool)
	RolesOf(member string) []string
}

// ClusterActions is what the nemesis does to the nodes of a multi-broker
// cluster. [ClusterControl] implements it over the cluster command and the
// cluster's metadata.
type ClusterActions interface {
	// NodeIDs lists the node ids of the cluster, in order.
	NodeIDs() []int32

	// TxnCoordinator returns the transaction coordinator of a
	// transactional id, StateLeader the leader of the state partition of
	// the roles, and ActiveController the active KRaft controller.
	TxnCoordinator(ctx context.Context, transactionalID string) (int32, error)
	StateLeader(ctx context.Context) (int32, error)
	ActiveController(ctx context.Context) (int32, error)

	// KillNode kills a node (SIGKILL), RestartNode stops it gracefully if
	// it runs and starts it again, PauseNode stops it (SIGSTOP) and
	// ResumeNode continues it.
	KillNode(ctx context.Context, id int32) error
	RestartNode(ctx context.Context, id int32) error
	PauseNode(ctx context.Context, id int32) error
	ResumeNode(ctx context.Context, id int32) error

	// AwaitRecovered returns once every node is up and every replica of
	// the run's partitions is in sync.
	AwaitRecovered(ctx context.Context) error
}

// BrokerCutter is what the nemesis needs of its [Actions] for a
// [FaultBrokerCut]; the orchestrator implements it over the proxies of its
// members.
type BrokerCutter interface {
	// CutBroker cuts every member off the node, and HealBroker ends the cut.
	CutBroker(node int32, mode CutMode) error
	HealBroker(node int32) error
}

// RequestFaulter is what the nemesis needs of its [Actions] for a
// [FaultRequest]; the orchestrator implements it over the Kafka-aware
// proxies of its members.
type RequestFaulter interface {
	// ArmRequest arms the fault on every proxy of the member.
	ArmRequest(member string, fault RequestFault) (*ArmedRequest, error)
}

// clusterFaultBound bounds one cluster fault, its recovery included.
const clusterFaultBound = 6 * time.Minute

// Nemesis plays a fault schedule against a run.
type Nemesis struct {
	// Steps is the schedule.
	Steps []Step

	// Members and Roles name the targets.
	Members, Roles []string

	// Actions carries the faults out.
	Actions Actions

	// Log receives each fault twice: when it begins and when it heals.
	Log *LineLog

	// MaxDown bounds the members under a pause, a kill or a cut at one
	// time; a step that would pass it is skipped, and so is a step whose
	// every target is busy.
	MaxDown int

	// Cluster carries out the cluster faults; nil skips them.
	Cluster ClusterActions

	// Quiet is how long after the end of a cluster fault no member fault
	// begins, so that every leadership change in that window is the
	// cluster fault's doing.
	Quiet time.Duration

	// Mixed lets member faults overlap the cluster faults: a cluster fault
	// then waits only for the previous cluster fault, and no member step is
	// skipped for a cluster fault. The leadership changes of a cluster
	// fault are then no longer its own, but a short run holds every kind.
	Mixed bool
}

// active is a fault that waits for its heal.
type active struct {
	fault  Fault
	healAt time.Time
	armed  *ArmedRequest // a request fault's
}

// Run plays the schedule from start until its end or the end of ctx,
// whichever comes first, and then heals every fault still in force. It runs
// on the caller's goroutine. A broker restart runs on a goroutine of its
// own, so that the heals of the other faults keep their time while the
// broker starts; Run waits for it before it returns, and skips a broker
// restart that would overlap the previous one. It returns the faults it
// made.
//
// The cluster faults run one at a time, each on a goroutine of its own,
// and never overlap a fault of a member, so that no two nodes of three are
// down at once (min.insync.replicas 2 would stall every write) and every
// leadership change in the window of a cluster fault is its doing. A
// cluster fault that comes due waits until the previous one is over and
// every member fault has healed, and then for Quiet; while one waits or
// runs, and for Quiet after it, a member step is skipped. A cluster fault that began always
// runs to its end, the restart of its node included, even after ctx ends;
// one that has not begun by then is dropped. With Mixed, the cluster faults
// still run one at a time, and the member faults go on beside them.
func (n *Nemesis) Run(ctx context.Context, start time.Time) (done []Fault) {
	var pending []active
	var restart chan Fault   // the broker restart in flight, if any
	var cluster chan Fault   // the cluster fault in flight, if any
	var queued []Step        // cluster faults that came due and wait
	var quietUntil time.Time // no member fault before it
	var lastHeal time.Time   // no cluster fault before lastHeal + Quiet
	defer func() {
		if restart != nil {
			done = append(done, <-restart)
		}
		if cluster != nil {
			done = append(done, <-cluster)
		}
	}()
	busy := make(map[string]string) // member -> kind of its process fault
	skewed := make(map[string]bool)
	next := 0
	heal := func(a active) {
		f := a.fault
		var err error
		switch f.Kind {
		case FaultPause:
			err = n.Actions.Resume(f.Target)
			delete(busy, f.Target)
		case FaultKill:
			err = n.Actions.Restart(f.Target)
			delete(busy, f.Target)
		case FaultCut:
			err = n.Actions.Heal(f.Target)
			delete(busy, f.Target)
		case FaultSkew:
			err = n.Actions.Skew(f.Target, 0)
			delete(skewed, sideKey(f.Kind, f.Target))
		case FaultRequest:
			delete(skewed, sideKey(f.Kind, f.Target))
			if a.armed != nil {
				a.armed.Disarm()
				if hit, ok := a.armed.Hit(); ok {
					f.Hit = &hit
				}
			}
		}
		f.EndMillis = time.Now().UnixMilli()
		lastHeal = time.Now()
		if err != nil {
			f.Error = joinText(f.Error, "heal: "+err.Error())
		}
		n.log(f)
		done = append(done, f)
	}
	for {
		clusterWaits := cluster == nil && len(queued) > 0 && (len(pending) == 0 || n.Mixed)
		if clusterWaits && ctx.Err() == nil && (n.Mixed || !time.Now().Before(lastHeal.Add(n.Quiet))) {
			clusterWaits = false
			step := queued[0]
			queued = queued[1:]
			cluster = make(chan Fault, 1)
			go func(ch chan<- Fault) { ch <- n.clusterFault(ctx, step) }(cluster)
		}
		// The next thing to do: a heal that is due, or the next step.
		slices.SortFunc(pending, func(a, b active) int { return a.healAt.Compare(b.healAt) })
		var wake time.Time
		stepDue := next < len(n.Steps)
		if stepDue {
			wake = start.Add(n.Steps[next].At)
		}
		if len(pending) > 0 && (!stepDue || pending[0].healAt.Before(wake)) {
			wake = pending[0].healAt
		}
		if !stepDue && len(pending) == 0 && len(queued) == 0 {
			return done
		}
		if clusterWaits && (wake.IsZero() || lastHeal.Add(n.Quiet).Before(wake)) {
			wake = lastHeal.Add(n.Quiet)
		}
		var timer <-chan time.Time
		if !wake.IsZero() {
			timer = time.After(time.Until(wake))
		}
		select {
		case <-ctx.Done():
			for _, a := range pending {
				heal(a)
			}
			return done
		case f := <-restart:
			done = append(done, f)
			restart = nil
			continue
		case f := <-cluster:
			done = append(done, f)
			cluster = nil
			quietUntil = time.Now().Add(n.Quiet)
			lastHeal = time.Now() // the next cluster fault waits the quiet time too
			continue
		case <-timer:
		}
		if len(pending) > 0 && !time.Now().Before(pending[0].healAt) {
			heal(pending[0])
			pending = pending[1:]
			continue
		}
		if !stepDue || time.Now().Before(start.Add(n.Steps[next].At)) {
			continue // the wake was for a waiting cluster fault
		}
		step := n.Steps[next]
		next++
		if slices.Contains(ClusterFaults, step.Kind) {
			if n.Cluster != nil {
				queued = append(queued, step)
			}
			continue
		}
		if !n.Mixed && (cluster != nil || len(queued) > 0 || time.Now().Before(quietUntil)) {
			continue // a member step never overlaps a cluster fault
		}
		if step.Kind == FaultBrokerRestart {
			if restart == nil {
				restart = make(chan Fault, 1)
				go func(ch chan<- Fault) { ch <- n.restartBroker(ctx, step) }(restart)
			}
			continue
		}
		if f, armed, ok := n.begin(step, busy, skewed); ok {
			healAt := time.Now().Add(step.Hold)
			if step.Kind == FaultRequest && (step.Request == RequestHold || step.Request == RequestResetHold) {
				healAt = healAt.Add(resendWait + 2*time.Second) // a hold's release, logged with its heal
			}
			pending = append(pending, active{fault: f, healAt: healAt, armed: armed})
		}
	}
}

// restartBroker restarts the broker and logs the fault.
func (n *Nemesis) restartBroker(ctx context.Context, step Step) Fault {
	f := Fault{Index: step.Index, Kind: step.Kind, StartMillis: time.Now().UnixMilli()}
	n.log(f)
	if err := n.Actions.RestartBroker(ctx); err != nil {
		f.Error = err.Error()
	}
	f.EndMillis = time.Now().UnixMilli()
	n.log(f)
	return f
}

// clusterFault carries out one cluster fault and waits for the recovery of
// the cluster; it logs the fault when it begins and when it is over.
func (n *Nemesis) clusterFault(ctx context.Context, step Step) Fault {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), clusterFaultBound)
	defer cancel()
	f := Fault{Index: step.Index, Kind: step.Kind, Rule: step.Rule(n.Roles)}
	fail := func(err error) Fault {
		f.Error = joinText(f.Error, err.Error())
		now := time.Now().UnixMilli()
		if f.StartMillis == 0 {
			f.StartMillis = now
		}
		f.HealMillis = max(f.HealMillis, f.StartMillis)
		f.EndMillis = now
		n.log(f)
		return f
	}
	probe, cancelProbe := context.WithTimeout(ctx, 15*time.Second)
	var target int32 = -1
	var err error
	switch step.Kind {
	case FaultCoordinatorKill, FaultBrokerCut:
		role := n.Roles[min(max(step.LeaderOf, 0), len(n.Roles)-1)]
		target, err = n.Cluster.TxnCoordinator(probe, role)
	case FaultStateLeaderKill:
		target, err = n.Cluster.StateLeader(probe)
	case FaultControllerStop:
		target, err = n.Cluster.ActiveController(probe)
	case FaultRollingRestart:
		ids := n.Cluster.NodeIDs()
		if len(ids) == 0 {
			err = errors.New("no node to restart")
			break
		}
		first := step.Node % len(ids)
		f.Nodes = append(slices.Clone(ids[first:]), ids[:first]...)
		target = f.Nodes[0]
	}
	cancelProbe()
	if err != nil {
		return fail(fmt.Errorf("find the target: %w", err))
	}
	f.Node = target
	if f.Nodes == nil {
		f.Nodes = []int32{target}
	}
	f.Target = fmt.Sprintf("node %d", target)
	f.StartMillis = time.Now().UnixMilli()
	n.log(f)
	hold := func() {
		select {
		case <-ctx.Done():
		case <-time.After(step.Hold):
		}
	}
	switch step.Kind {
	case FaultCoordinatorKill, FaultStateLeaderKill:
		if err := n.Cluster.KillNode(ctx, target); err != nil {
			f.Error = joinText(f.Error, err.Error())
			break
		}
		hold()
		if err := n.Cluster.RestartNode(ctx, target); err != nil {
			f.Error = joinText(f.Error, "heal: "+err.Error())
		}
	case FaultControllerStop:
		if err := n.Cluster.PauseNode(ctx, target); err != nil {
			f.Error = joinText(f.Error, err.Error())
			break
		}
		hold()
		if err := n.Cluster.ResumeNode(ctx, target); err != nil {
			f.Error = joinText(f.Error, "heal: "+err.Error())
		}
	case FaultBrokerCut:
		cutter, ok := n.Actions.(BrokerCutter)
		if !ok {
			f.Error = joinText(f.Error, "the actions cannot cut a broker")
			break
		}
		f.Mode = string(CutStall)
		if err := cutter.CutBroker(target, CutStall); err != nil {
			f.Error = joinText(f.Error, err.Error())
			break
		}
		hold()
		if err := cutter.HealBroker(target); err != nil {
			f.Error = joinText(f.Error, "heal: "+err.Error())
		}
	case FaultRollingRestart:
		for i, id := range f.Nodes {
			if i > 0 {
				if err := n.Cluster.AwaitRecovered(ctx); err != nil {
					return fail(err)
				}
			}
			if err := n.Cluster.RestartNode(ctx, id); err != nil {
				return fail(fmt.Errorf("restart node %d: %w", id, err))
			}
		}
	}
	f.HealMillis = time.Now().UnixMilli()
	if err := n.Cluster.AwaitRecovered(ctx); err != nil {
		return fail(err)
	}
	f.EndMillis = time.Now().UnixMilli()
	n.log(f)
	return f
}

// sideKey names a fault that runs beside the process faults (a skew, a
// request fault) in the map of those in force: one of each kind per
// member at a time.
func sideKey(kind, member string) string { return kind + "/" + member }

// begin starts one step of a member; it reports false for a skipped step.
// A request fault returns what it armed.
func (n *Nemesis) begin(step Step, busy map[string]string, side map[string]bool) (Fault, *ArmedRequest, bool) {
	f := Fault{Index: step.Index, Kind: step.Kind, Rule: step.Rule(n.Roles), Mode: string(step.Mode), SkewMillis: step.SkewMillis}
	processFault := step.Kind != FaultSkew && step.Kind != FaultRequest
	if processFault && len(busy) >= n.MaxDown {
		return f, nil, false
	}
	free := func(member string) bool {
		if processFault {
			_, taken := busy[member]
			return !taken
		}
		return step.Kind == FaultRequest || !side[sideKey(step.Kind, member)] // request faults stack up
	}
	// The rule's target first, then the members in order after it.
	first := step.Member
	if step.LeaderOf >= 0 && step.LeaderOf < len(n.Roles) {
		if leader, ok := n.Actions.LeaderOf(n.Roles[step.LeaderOf]); ok {
			first = slices.Index(n.Members, leader)
		}
	}
	first = max(first, 0)
	target := ""
	for i := range n.Members {
		candidate := n.Members[(first+i)%len(n.Members)]
		if free(candidate) {
			target = candidate
			break
		}
	}
	if target == "" {
		return f, nil, false
	}
	f.Target = target
	f.LeaderOf = n.Actions.RolesOf(target)
	f.StartMillis = time.Now().UnixMilli()
	var err error
	var armed *ArmedRequest
	switch step.Kind {
	case FaultPause:
		err = n.Actions.Pause(target)
		busy[target] = step.Kind
	case FaultKill:
		err = n.Actions.Kill(target)
		busy[target] = step.Kind
	case FaultCut:
		err = n.Actions.Cut(target, step.Mode)
		busy[target] = step.Kind
	case FaultSkew:
		err = n.Actions.Skew(target, step.SkewMillis)
		side[sideKey(step.Kind, target)] = true
	case FaultRequest:
		f.Request, f.Keys, f.Code = step.Request, []int16{step.Key}, step.Code
		faulter, ok := n.Actions.(RequestFaulter)
		if !ok {
			err = errors.New("the actions cannot fault a request")
			break
		}
		armed, err = faulter.ArmRequest(target, RequestFault{Mode: step.Request, Keys: f.Keys, Delay: step.Delay, MaxHold: step.Hold, Code: step.Code})
	}
	if err != nil {
		f.Error = err.Error()
	}
	n.log(f)
	return f, armed, true
}

func (n *Nemesis) log(f Fault) {
	if n.Log != nil {
		_ = n.Log.Append(f)
	}
}

func joinText(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
