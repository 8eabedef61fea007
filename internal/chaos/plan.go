package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/krabka-io/krabka-streams-go/internal/kafkacodes"
)

// PlanConfig is what a fault schedule is drawn from.
type PlanConfig struct {
	// Seed seeds the draw. One seed gives one schedule.
	Seed int64

	// Duration is the length of the fault phase.
	Duration time.Duration

	// Members and Roles are the counts of the run.
	Members, Roles int

	// Faults lists the enabled kinds.
	Faults []string

	// Lease scales the durations of the faults.
	Lease time.Duration

	// MeanGap is the mean time between the starts of two faults.
	MeanGap time.Duration

	// MaxSkew is the largest clock offset of a skew.
	MaxSkew time.Duration

	// BrokerRestartEvery is the length of the window that holds one broker
	// restart.
	BrokerRestartEvery time.Duration

	// ClusterFaultEvery is the length of the window that holds one cluster
	// fault (the Cluster* kinds of [ClusterFaults]); the kinds take turns,
	// in an order drawn from the seed, so that a run of windows × kinds
	// holds every kind. Nodes is the number of nodes of the cluster.
	ClusterFaultEvery time.Duration
	Nodes             int

	// ClusterHold, when above zero, is the longest hold of a cluster fault
	// (the downtime of a killed node, the stop of the controller, the cut of
	// a node), drawn from [ClusterHold/2, ClusterHold]; zero draws it from
	// [Lease/2, 2 x Lease]. A long lease (the default timings) then need not
	// mean minutes of downtime per fault.
	ClusterHold time.Duration

	// RequestKeys lists the API keys that the request faults take turns
	// at (empty: [LibraryRequestKeys]), and RequestGap is the mean time between the starts of two
	// request faults (0: MeanGap). Request faults run beside the other
	// faults, at most one per member at a time.
	RequestKeys []int16
	RequestGap  time.Duration
}

// Step is one fault of a schedule.
type Step struct {
	// Index numbers the steps from 0.
	Index int `json:"i"`

	// At is the start of the fault, from the start of the fault phase.
	At time.Duration `json:"at"`

	// Kind is one of the Fault* constants.
	Kind string `json:"kind"`

	// LeaderOf, when not negative, aims the fault at the leader of that role
	// as the orchestrator sees it when the fault begins; otherwise the fault
	// aims at Member. A busy or unknown target falls to the next member.
	LeaderOf int `json:"leader_of"`
	Member   int `json:"member"`

	// Hold is how long the fault lasts: the pause, the downtime of a killed
	// member, the cut, the skew.
	Hold time.Duration `json:"hold"`

	// Node, for a rolling restart, is the index of the first node (in node
	// id order) that restarts; the others follow in order.
	Node int `json:"node,omitempty"`

	// Mode is the mode of a cut.
	Mode CutMode `json:"mode,omitempty"`

	// SkewMillis is the clock offset of a skew.
	SkewMillis int64 `json:"skew,omitempty"`

	// Request is the mode of a request fault, Key the API key it takes,
	// and Delay the delay of RequestDelay. Hold bounds the wait for the
	// request, and the hold of RequestHold.
	Request RequestMode   `json:"request,omitempty"`
	Key     int16         `json:"key,omitempty"`
	Delay   time.Duration `json:"delay,omitempty"`

	// Code is the error code of RequestErrorCode and RequestAppliedError:
	// the codes of the key take turns (internal/kafkacodes: Codes for the
	// first, Applied for the second; a key without an applied code gets
	// RequestErrorCode instead).
	Code int16 `json:"code,omitempty"`
}

// Rule describes how the step picks its target.
func (s Step) Rule(roles []string) string {
	switch s.Kind {
	case FaultBrokerRestart, FaultControllerStop, FaultRollingRestart:
		return ""
	case FaultCoordinatorKill, FaultBrokerCut:
		if s.LeaderOf >= 0 && s.LeaderOf < len(roles) {
			return "transaction coordinator of " + roles[s.LeaderOf]
		}
		return ""
	case FaultStateLeaderKill:
		return "leader of the state partition"
	}
	if s.LeaderOf >= 0 && s.LeaderOf < len(roles) {
		return "leader of " + roles[s.LeaderOf]
	}
	return fmt.Sprintf("member %d", s.Member)
}

// NewPlan draws a fault schedule. It is a pure function of the config: the
// same config gives the same schedule, whatever the run does. Only the
// resolution of "the leader of a role" depends on the run.
func NewPlan(c PlanConfig) ([]Step, error) {
	kinds := make(map[string]bool)
	for _, kind := range c.Faults {
		if !slices.Contains(AllFaults, kind) {
			return nil, fmt.Errorf("unknown fault kind %q (known: %v)", kind, AllFaults)
		}
		kinds[kind] = true
	}
	if c.Members < 1 || c.Roles < 1 || c.Lease <= 0 || c.MeanGap <= 0 {
		return nil, fmt.Errorf("plan: want members, roles, lease and mean gap above zero")
	}
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0x6b7261626b61)) //nolint:gosec // the seed's bits; "krabka"
	between := func(lo, hi float64) float64 { return lo + rng.Float64()*(hi-lo) }
	scale := func(lo, hi float64) time.Duration { return time.Duration(between(lo, hi) * float64(c.Lease)) }
	clusterHold := func() time.Duration {
		if c.ClusterHold > 0 {
			return time.Duration(between(0.5, 1) * float64(c.ClusterHold))
		}
		return scale(0.5, 2)
	}

	var member []string
	for _, kind := range MemberFaults {
		if kinds[kind] {
			member = append(member, kind)
		}
	}
	var steps []Step
	if len(member) > 0 {
		at := time.Duration(between(0.3, 1) * float64(c.MeanGap))
		for at < c.Duration {
			s := Step{At: at, Kind: member[rng.IntN(len(member))], LeaderOf: -1, Member: rng.IntN(c.Members)}
			if rng.Float64() < 0.7 {
				s.LeaderOf = rng.IntN(c.Roles)
			}
			switch s.Kind {
			case FaultPause:
				s.Hold = scale(1.2, 3)
			case FaultKill:
				s.Hold = scale(0.2, 2)
			case FaultCut:
				s.Hold = scale(0.3, 3)
				s.Mode = CutDrop
				if rng.IntN(2) == 0 {
					s.Mode = CutStall
				}
			case FaultSkew:
				s.Hold = scale(2, 6)
				skew := between(1, max(1, c.MaxSkew.Seconds())) * 1000
				if rng.IntN(2) == 0 {
					skew = -skew
				}
				s.SkewMillis = int64(skew)
			}
			steps = append(steps, s)
			at += time.Duration(between(0.5, 1.5) * float64(c.MeanGap))
		}
	}
	if kinds[FaultRequest] {
		gap := c.RequestGap
		if gap <= 0 {
			gap = c.MeanGap
		}
		// The keys and the modes take turns, each in an order drawn from
		// the seed, so that a run of keys × modes faults holds every pair.
		keys := slices.Clone(c.RequestKeys)
		if len(keys) == 0 {
			keys = slices.Clone(LibraryRequestKeys)
		}
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		modes := slices.Clone(RequestModes)
		rng.Shuffle(len(modes), func(i, j int) { modes[i], modes[j] = modes[j], modes[i] })
		k := 0
		codeTurns := make(map[[2]int16]int) // (key, applied) -> the codes drawn so far
		for at := time.Duration(between(0.3, 1) * float64(gap)); at < c.Duration; at += time.Duration(between(0.5, 1.5) * float64(gap)) {
			s := Step{At: at, Kind: FaultRequest, LeaderOf: -1, Member: rng.IntN(c.Members),
				Key: keys[k%len(keys)], Request: modes[(k/len(keys))%len(modes)], Hold: scale(0.3, 1)}
			k++
			if rng.Float64() < 0.7 {
				s.LeaderOf = rng.IntN(c.Roles)
			}
			switch s.Request {
			case RequestDelay:
				s.Delay = scale(0.1, 1)
			case RequestHold, RequestResetHold:
				s.Hold = scale(1, 2) // past the client's read timeout (a renew interval and more)
			case RequestErrorCode, RequestAppliedError:
				s.Request, s.Code = requestCode(s.Key, s.Request, codeTurns)
			}
			steps = append(steps, s)
		}
	}
	if kinds[FaultBrokerRestart] && c.BrokerRestartEvery > 0 {
		for window := time.Duration(0); window < c.Duration; window += c.BrokerRestartEvery {
			at := window + time.Duration(between(0.3, 0.7)*float64(c.BrokerRestartEvery))
			if at < c.Duration {
				steps = append(steps, Step{At: at, Kind: FaultBrokerRestart, LeaderOf: -1, Member: -1})
			}
		}
	}
	var cluster []string
	for _, kind := range ClusterFaults {
		if kinds[kind] {
			cluster = append(cluster, kind)
		}
	}
	if len(cluster) > 0 && c.ClusterFaultEvery > 0 {
		rng.Shuffle(len(cluster), func(i, j int) { cluster[i], cluster[j] = cluster[j], cluster[i] })
		k := 0
		for window := time.Duration(0); window < c.Duration; window += c.ClusterFaultEvery {
			at := window + time.Duration(between(0.1, 0.4)*float64(c.ClusterFaultEvery))
			if at >= c.Duration {
				break
			}
			s := Step{At: at, Kind: cluster[k%len(cluster)], LeaderOf: -1, Member: -1}
			k++
			switch s.Kind {
			case FaultCoordinatorKill:
				s.LeaderOf = rng.IntN(c.Roles)
				s.Hold = clusterHold()
			case FaultBrokerCut:
				s.LeaderOf = rng.IntN(c.Roles)
				s.Hold = clusterHold()
			case FaultStateLeaderKill:
				s.LeaderOf = 0
				s.Hold = clusterHold()
			case FaultControllerStop:
				s.Hold = clusterHold()
			case FaultRollingRestart:
				s.Node = rng.IntN(max(c.Nodes, 1))
			}
			steps = append(steps, s)
		}
	}
	slices.SortStableFunc(steps, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
	for i := range steps {
		steps[i].Index = i
	}
	return steps, nil
}

// requestCode draws the code of an error-code step of key: the codes of
// the key take turns, counted in turns. A key without an applied code
// turns RequestAppliedError into RequestErrorCode; a key without any code
// in the table gets UNKNOWN_SERVER_ERROR.
func requestCode(key int16, mode RequestMode, turns map[[2]int16]int) (RequestMode, int16) {
	codes := kafkacodes.AppliedOf(key)
	if mode != RequestAppliedError || len(codes) == 0 {
		mode, codes = RequestErrorCode, kafkacodes.Of(key)
	}
	if len(codes) == 0 {
		return mode, kerr.UnknownServerError.Code
	}
	turn := [2]int16{key, 0}
	if mode == RequestAppliedError {
		turn[1] = 1
	}
	code := codes[turns[turn]%len(codes)].Code
	turns[turn]++
	return mode, code
}
