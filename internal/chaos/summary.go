package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is the machine-readable outcome of a run: what the run was, and
// what the checker found. The --json flag prints it, and the run writes it
// to summary.json in its directory.
type Summary struct {
	// RunID, Seed and the timings repeat [RunInfo].
	RunID    string `json:"run_id"`
	Seed     int64  `json:"seed"`
	Members  int    `json:"members"`
	Duration string `json:"duration"`
	Lease    string `json:"lease"`
	Renew    string `json:"renew"`
	Stagger  string `json:"stagger"`

	// Options names the library extensions that the members switched on:
	// "heartbeats every <interval>", or "none (the specification's
	// defaults)".
	Options string `json:"options"`

	// Nodes and ReplicationFactor describe the cluster: its brokers and
	// the replication factor of the run's topics.
	Nodes             int `json:"nodes,omitempty"`
	ReplicationFactor int `json:"replication_factor,omitempty"`

	// Report is the verdict of the checker.
	Report *Report `json:"report"`

	// OK reports zero violations and zero lost commands.
	OK bool `json:"ok"`
}

// NewSummary joins a run and its report.
func NewSummary(info *RunInfo, report *Report) *Summary {
	return &Summary{
		RunID:    info.RunID,
		Seed:     info.Seed,
		Members:  len(info.Members),
		Duration: (time.Duration(info.EndMillis-info.StartMillis) * time.Millisecond).Truncate(time.Second).String(),
		Lease:    info.Lease.String(),
		Renew:    info.Renew.String(),
		Stagger:  info.Stagger.String(),
		Options:  runOptions(info),
		Nodes:    len(info.Nodes),

		ReplicationFactor: info.ReplicationFactor,
		Report:            report,
		OK:                report.OK(),
	}
}

// WriteTable prints the summary table, and then every violation and every
// lost command.
func (s *Summary) WriteTable(w io.Writer) error {
	r := s.Report
	ms := func(v int64) string { return (time.Duration(v) * time.Millisecond).String() }
	var faults []string
	total := 0
	for _, kind := range AllFaults {
		if r.FaultsByKind[kind] == 0 && !slices.Contains(MemberFaults, kind) {
			continue
		}
		faults = append(faults, fmt.Sprintf("%s=%d", kind, r.FaultsByKind[kind]))
		total += r.FaultsByKind[kind]
	}
	var roles []string
	for _, role := range r.Roles {
		roles = append(roles, fmt.Sprintf("%s: %d commands, %d terms", role.Role, role.Commands, role.Terms))
	}
	st := r.FailoverStats
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	rows := [][2]string{
		{"run", fmt.Sprintf("%s (seed %d)", s.RunID, s.Seed)},
		{"duration", s.Duration},
		{"members / roles", fmt.Sprintf("%d / %d", s.Members, len(r.Roles))},
		{"lease / renew / stagger", fmt.Sprintf("%s / %s / %s", s.Lease, s.Renew, s.Stagger)},
		{"library extensions", s.Options},
		{"faults", fmt.Sprintf("%d: %s", total, strings.Join(faults, " "))},
		{"leadership changes", fmt.Sprintf("%d in the command stream (%d lease terms)", r.LeadershipChanges, r.LeaseTerms)},
		{"per role", strings.Join(roles, "; ")},
		{"command records in the log", fmt.Sprint(r.Commands)},
		{"commands acknowledged", fmt.Sprint(r.Acknowledged)},
		{"commands refused (ErrFenced)", fmt.Sprintf("%d (%d self-fenced: own late copy + unexplained)", r.Refused, r.SelfFenced)},
		{"fenced by", fmt.Sprintf("rival acquired %d, rival late copy %d, own late copy %d, fault-made %d, unexplained %d",
			r.FenceCauses.RivalAcquired, r.FenceCauses.RivalLateCopy, r.FenceCauses.OwnLateCopy, r.FenceCauses.FaultMade, r.FenceCauses.Unexplained)},
		{"writes of unknown outcome", fmt.Sprintf("%d (%d present, each once)", r.Unknown, r.UnknownPresent)},
		{"writes reported not committed", fmt.Sprintf("%d (any present is a false report)", r.NotCommitted)},
		{"present, never acknowledged", fmt.Sprint(r.Unacknowledged)},
		{"violations", fmt.Sprint(len(r.Violations))},
		{"linearizable (Porcupine)", linearText(r.Linearizability)},
		{"lost commands", fmt.Sprint(len(r.Lost))},
		{"failovers after a leader fault", fmt.Sprintf("%d measured, %d retained, %d unresolved, %d excluded", st.Measured, st.Retained, st.Unresolved, st.Excluded)},
		{"failover p50 / p99 / max", fmt.Sprintf("%s / %s / %s", ms(st.P50Millis), ms(st.P99Millis), ms(st.MaxMillis))},
		{"failover bound", fmt.Sprintf("%s + 2 x skew in force; %d over it", ms(st.BoundMillis), st.OverBound)},
		{"changes without a fault", fmt.Sprintf("%d (window of a fault: its start to its end + %s)", r.ChangesWithoutFault, ms(st.BoundMillis))},
		{"longest gap without an ack", fmt.Sprintf("%s (%s outside every fault window)", ms(r.LongestGapMillis), ms(r.LongestGapNoFaultMillis))},
		{"largest call past its context", ms(r.MaxCallOverMillis)},
	}
	if len(r.EndCauses) > 0 {
		var causes []string
		for _, c := range r.EndCauses {
			causes = append(causes, fmt.Sprintf("%s %d", c.Cause, c.Count))
		}
		rows = append(rows, [2]string{"leaderships ended, by cause", strings.Join(causes, "; ")})
	}
	if len(r.RequestFaults) > 0 {
		var apis []string
		for _, st := range r.RequestFaults {
			var modes []string
			for _, mode := range RequestModes {
				if n := st.ByMode[string(mode)]; n > 0 {
					modes = append(modes, fmt.Sprintf("%s %d", mode, n))
				}
			}
			apis = append(apis, fmt.Sprintf("%s %d/%d (%s; %d applied late)", st.API, st.Fired, st.Armed, strings.Join(modes, ", "), st.Late))
		}
		rows = slices.Insert(rows, 6, [2]string{"request faults by API, taken/armed", strings.Join(apis, "; ")})
	}
	if s.Nodes > 0 {
		rows = slices.Insert(rows, 3, [2]string{"brokers / replication factor", fmt.Sprintf("%d / %d", s.Nodes, s.ReplicationFactor)})
	}
	verdict := "PASS"
	if !s.OK {
		verdict = "FAIL"
	}
	rows = append(rows, [2]string{"verdict", verdict})
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.ByKind) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintf(tw, "fault kind\tsamples\tlongest gap without an ack p50 / max\tKafka detection p50 / max (of n)\tchanges of one role p50 / max\tchanges, all roles (to another member)\tepochs of one role p50 / max\tunknown-outcome writes\n")
		for _, k := range r.ByKind {
			detect := "-"
			if k.Detected > 0 {
				detect = fmt.Sprintf("%s / %s (%d)", ms(k.DetectP50Millis), ms(k.DetectMaxMillis), k.Detected)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s / %s\t%s\t%d / %d\t%d (%d)\t%d / %d\t%d\n", k.Kind, k.Faults, ms(k.GapP50Millis), ms(k.GapMaxMillis),
				detect, k.ChangesP50, k.ChangesMax, k.Changes, k.Handovers, k.EpochsP50, k.EpochsMax, k.Unknown)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		for _, im := range r.Impacts {
			if !IsBrokerFault(im.Kind) {
				continue
			}
			rel := func(v int64) string {
				if v < 0 {
					return "-"
				}
				return fmt.Sprintf("+%.2fs", float64(v)/1000)
			}
			detect := "-"
			if im.DetectMillis >= 0 {
				detect = rel(im.DetectMillis)
			}
			fmt.Fprintf(w, "FAULT %d %s %s at %s: Kafka detection %s; first end of a leadership %s, first acquisition %s; longest gap %s (acks at %+.2fs and %+.2fs); %d changes (%d to another member), %d epochs, %d unknown\n",
				im.Fault, im.Kind, im.Target, formatMillis(im.StartMillis), detect, rel(im.EndedMillis), rel(im.AcquiredMillis),
				ms(im.LongestGapMillis), float64(im.GapFromMillis)/1000, float64(im.GapToMillis)/1000, im.Changes, im.Handovers, im.Epochs, im.Unknown)
		}
	}

	if len(r.Calls) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintf(tw, "call\tcount\twith a deadline\treturned after its context ended\tlargest time past it\tlongest call\tleft out (member paused)\n")
		for _, c := range r.Calls {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%d\n", c.Call, c.Count, c.Bounded, c.Ended, ms(c.MaxOverMillis), ms(c.MaxTookMillis), c.Excluded)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, c := range r.Calls {
			if c.MaxOverMillis > 0 {
				fmt.Fprintf(w, "worst %s: %s\n", c.Call, c.Worst)
			}
		}
	}
	for _, f := range r.Fences {
		if f.Cause == FenceOwnLateCopy || f.Cause == FenceUnexplained {
			fault := ""
			if f.Fault >= 0 {
				fault = fmt.Sprintf(", fault %d", f.Fault)
			}
			fmt.Fprintf(w, "SELF-FENCE %s: %s/%d %s under %s at %s, by %s (%s%s)\n", f.Cause, f.Member, f.Incarnation, f.Role, f.Token,
				formatMillis(f.AtMillis), cmp.Or(f.By, "nothing seen"), cmp.Or(f.Evidence, "no pair, no instant"), fault)
		}
	}
	for _, ch := range r.Changes {
		if ch.Fault < 0 || IsBrokerFault(ch.Kind) {
			fmt.Fprintf(w, "CHANGE %s\n", ch)
		}
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATION %s role %s offset %d: %s\n", v.Kind, v.Role, v.Offset, v.Detail)
	}
	for _, lost := range r.Lost {
		fmt.Fprintf(w, "LOST %s\n", lost)
	}
	if !r.Linearizability.OK() {
		for _, d := range r.Linearizability.Detail {
			fmt.Fprintf(w, "NOT LINEARIZABLE %s\n", d)
		}
	}
	for _, fo := range r.Failovers {
		if fo.Outcome == OutcomeMeasured && fo.Millis > fo.BoundMillis || fo.Outcome == OutcomeUnresolved {
			fmt.Fprintf(w, "SLOW failover: fault %d %s of %s (leader of %s) at %s: %s, bound %s\n",
				fo.Fault, fo.Kind, fo.Target, fo.Role, formatMillis(fo.StartMillis), failoverText(fo), ms(fo.BoundMillis))
		}
	}
	return nil
}

func linearText(l Linearizability) string {
	if l.Result == LinearAbsent {
		return "no history log"
	}
	return fmt.Sprintf("%s: %d operations, %d writes of unknown outcome, %d that cannot land left out; %s", l.Result, l.Ops, l.Unknown, l.Inert,
		(time.Duration(l.Millis) * time.Millisecond).String())
}

func failoverText(fo Failover) string {
	if fo.Outcome == OutcomeUnresolved {
		return "no new term before the end"
	}
	return (time.Duration(fo.Millis) * time.Millisecond).String()
}

// CheckRun reads a finished run from its directory and the broker, checks
// it, and writes summary.json and summary.txt into the directory. A
// non-empty brokers list replaces the brokers of run.json. settle bounds the
// wait for open transactions to end before the read, and the whole read
// gives up three minutes after that.
func CheckRun(ctx context.Context, dir string, brokers []string, settle time.Duration) (*Summary, error) {
	info, err := ReadRunInfo(dir)
	if err != nil {
		return nil, err
	}
	if len(brokers) > 0 {
		info.Brokers = brokers
	}
	if info.EndMillis == 0 {
		info.EndMillis = time.Now().UnixMilli()
	}
	ctx, cancel := context.WithTimeout(ctx, settle+3*time.Minute)
	defer cancel()
	in, err := LoadCheckInput(ctx, info, settle)
	if err != nil {
		return nil, err
	}
	summary := NewSummary(info, Check(in))
	data, err := json.MarshalIndent(summary, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(info.Path("summary.json"), append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	var table strings.Builder
	if err := summary.WriteTable(&table); err != nil {
		return nil, err
	}
	if err := os.WriteFile(info.Path("summary.txt"), []byte(table.String()), 0o644); err != nil {
		return nil, err
	}
	return summary, nil
}

// runOptions names the library extensions of a run's members.
func runOptions(info *RunInfo) string {
	var on []string
	if info.Heartbeat > 0 {
		on = append(on, "heartbeats every "+info.Heartbeat.String())
	}
	if info.RivalWatch {
		on = append(on, "the rival-mint watch")
	}
	if info.ResignationAnchor {
		on = append(on, "the resignation anchor")
	}
	if len(on) == 0 {
		return "none (the specification's defaults)"
	}
	return strings.Join(on, ", ")
}
