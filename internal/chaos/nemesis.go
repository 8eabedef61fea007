package chaos

import (
	"context"
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
}

// active is a fault that waits for its heal.
type active struct {
	fault  Fault
	healAt time.Time
}

// Run plays the schedule from start until its end or the end of ctx,
// whichever comes first, and then heals every fault still in force. It runs
// on the caller's goroutine. A broker restart runs on a goroutine of its
// own, so that the heals of the other faults keep their time while the
// broker starts; Run waits for it before it returns, and skips a broker
// restart that would overlap the previous one. It returns the faults it
// made.
func (n *Nemesis) Run(ctx context.Context, start time.Time) (done []Fault) {
	var pending []active
	var restart chan Fault // the broker restart in flight, if any
	defer func() {
		if restart != nil {
			done = append(done, <-restart)
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
			delete(skewed, f.Target)
		}
		f.EndMillis = time.Now().UnixMilli()
		if err != nil {
			f.Error = joinText(f.Error, "heal: "+err.Error())
		}
		n.log(f)
		done = append(done, f)
	}
	for {
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
		if !stepDue && len(pending) == 0 {
			return done
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
		case <-time.After(time.Until(wake)):
		}
		if len(pending) > 0 && !time.Now().Before(pending[0].healAt) {
			heal(pending[0])
			pending = pending[1:]
			continue
		}
		step := n.Steps[next]
		next++
		if step.Kind == FaultBrokerRestart {
			if restart == nil {
				restart = make(chan Fault, 1)
				go func(ch chan<- Fault) { ch <- n.restartBroker(ctx, step) }(restart)
			}
			continue
		}
		if f, ok := n.begin(step, busy, skewed); ok {
			pending = append(pending, active{fault: f, healAt: time.Now().Add(step.Hold)})
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

// begin starts one step of a member; it reports false for a skipped step.
func (n *Nemesis) begin(step Step, busy map[string]string, skewed map[string]bool) (Fault, bool) {
	f := Fault{Index: step.Index, Kind: step.Kind, Rule: step.Rule(n.Roles), Mode: string(step.Mode), SkewMillis: step.SkewMillis}
	processFault := step.Kind != FaultSkew
	if processFault && len(busy) >= n.MaxDown {
		return f, false
	}
	free := func(member string) bool {
		if processFault {
			_, taken := busy[member]
			return !taken
		}
		return !skewed[member]
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
		return f, false
	}
	f.Target = target
	f.LeaderOf = n.Actions.RolesOf(target)
	f.StartMillis = time.Now().UnixMilli()
	var err error
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
		skewed[target] = true
	}
	if err != nil {
		f.Error = err.Error()
	}
	n.log(f)
	return f, true
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
