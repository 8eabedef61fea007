package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// RunInfo describes one run. The orchestrator writes it to run.json in the
// run directory before it starts a member; every member reads it, and the
// checker reads it again after the run.
//
// The run directory holds:
//
//	run.json                 this description
//	plan.json                the fault schedule drawn from the seed
//	nemesis.log              one JSON line per fault, at its start and at its heal
//	mints.log                one JSON line per InitProducerId answer that passed a member's proxy ([Mint])
//	members/<id>.acks        the ack log of a member, every incarnation
//	members/<id>.events      the event log of a member, every incarnation
//	members/<id>.log         the standard error of a member (library logs)
//	members/<id>.clock       the clock offset of a member, in milliseconds
//	members/<id>.calls       one JSON line per exported call of a member: its context budget and its duration
//	members/<id>.history     one JSON line at the invocation and one at the return of each acquisition and guarded write
//	cluster.log              the output of the cluster command (cluster faults)
//	summary.json, summary.txt the verdict of the checker
type RunInfo struct {
	// RunID names the run; the topics and the roles carry it.
	RunID string `json:"run_id"`

	// Seed seeds the fault schedule.
	Seed int64 `json:"seed"`

	// Brokers lists the bootstrap brokers, as the user gave them.
	Brokers []string `json:"brokers"`

	// Nodes lists the brokers of the cluster as its metadata names them. A
	// member seeds its client with their addresses, and reaches each of
	// them through a proxy of its own.
	Nodes []BrokerNode `json:"nodes,omitempty"`

	// ReplicationFactor is the replication factor of the run's topics.
	ReplicationFactor int `json:"replication_factor,omitempty"`

	// StateTopic and StatePartitions name the coordination topic of the run.
	StateTopic      string `json:"state_topic"`
	StatePartitions int    `json:"state_partitions"`

	// CommandTopic holds the commands: the leader of Roles[i] writes to
	// the partitions [CommandPartitions](i, len(Roles), CommandSpread)
	// names, each command a Write of 2 or 3 records when CommandSpread is
	// 2 or more (0, a run before multi-record writes: partition i alone).
	CommandTopic  string   `json:"command_topic"`
	CommandSpread int      `json:"command_spread,omitempty"`
	Roles         []string `json:"roles"`

	// Members lists the member ids.
	Members []string `json:"members"`

	// The timings of a member.
	Lease   time.Duration `json:"lease"`
	Renew   time.Duration `json:"renew"`
	Stagger time.Duration `json:"stagger"`
	Poll    time.Duration `json:"poll"`
	// Heartbeat is the members' heartbeat interval, and zero when they run
	// without heartbeats (the specification's default).
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
	// ResignationAnchor: the members run coordination.WithResignationAnchor
	// (the mixed-release run, whose rolling restarts hand over in rank
	// order, as krabka-coord's do).
	ResignationAnchor bool `json:"resignation_anchor,omitempty"`
	// RivalWatch: the members run coordination.WithRivalMintWatch.
	RivalWatch      bool          `json:"rival_watch,omitempty"`
	CommandInterval time.Duration `json:"command_interval"`
	WriteTimeout    time.Duration `json:"write_timeout"`

	// Faults lists the fault kinds of the run, MaxSkew the largest clock
	// offset, and Slack the extra time a failover may take.
	Faults  []string      `json:"faults"`
	MaxSkew time.Duration `json:"max_skew"`
	Slack   time.Duration `json:"slack"`

	// ClusterDir is the run directory of the cluster of
	// scripts/kafka-cluster.sh (KRABKA_CLUSTER_DIR), whose node logs tell
	// when Kafka noticed each cluster fault; empty without a cluster.
	ClusterDir string `json:"cluster_dir,omitempty"`

	// StartMillis and EndMillis bound the fault phase of the run, in host
	// milliseconds since the Unix epoch.
	StartMillis int64 `json:"start"`
	EndMillis   int64 `json:"end"`

	// Dir is the run directory. It is not stored: the reader sets it.
	Dir string `json:"-"`
}

// Path returns the path of a file of the run directory.
func (info *RunInfo) Path(elem ...string) string {
	return filepath.Join(append([]string{info.Dir}, elem...)...)
}

// MemberPath returns the path of a file of one member: ext is "acks",
// "events", "log" or "clock".
func (info *RunInfo) MemberPath(member, ext string) string {
	return info.Path("members", member+"."+ext)
}

// WriteRunInfo writes run.json.
func WriteRunInfo(info *RunInfo) error {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := info.Path("run.json.tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, info.Path("run.json"))
}

// ReadRunInfo reads run.json from a run directory.
func ReadRunInfo(dir string) (*RunInfo, error) {
	data, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return nil, err
	}
	info := &RunInfo{}
	if err := json.Unmarshal(data, info); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "run.json"), err)
	}
	info.Dir = dir
	return info, nil
}

type runLogs struct {
	acks    []Ack
	events  []Event
	faults  []Fault
	calls   []Call
	history []HistoryEntry
	mints   []Mint
}

// loadLogs reads the logs of every member and the nemesis log.
func loadLogs(info *RunInfo) (runLogs, error) {
	var logs runLogs
	for _, member := range info.Members {
		acks, err := ReadLines[Ack](info.MemberPath(member, "acks"))
		if err != nil {
			return logs, err
		}
		events, err := ReadLines[Event](info.MemberPath(member, "events"))
		if err != nil {
			return logs, err
		}
		calls, err := ReadLines[Call](info.MemberPath(member, "calls"))
		if err != nil {
			return logs, err
		}
		history, err := ReadLines[HistoryEntry](info.MemberPath(member, "history"))
		if err != nil {
			return logs, err
		}
		logs.history = append(logs.history, history...)
		logs.calls = append(logs.calls, calls...)
		logs.acks = append(logs.acks, acks...)
		logs.events = append(logs.events, events...)
	}
	faults, err := ReadFaults(info.Path("nemesis.log"), info.EndMillis)
	if err != nil {
		return logs, err
	}
	logs.faults = faults
	if logs.mints, err = ReadLines[Mint](info.Path("mints.log")); err != nil {
		return logs, err
	}
	return logs, nil
}

// ReadFaults reads a nemesis log. The nemesis writes a line when a fault
// begins and another when it heals; the later line of an index wins. A
// fault that never healed ends at endMillis.
func ReadFaults(path string, endMillis int64) ([]Fault, error) {
	lines, err := ReadLines[Fault](path)
	if err != nil {
		return nil, err
	}
	byIndex := make(map[int]Fault)
	for _, f := range lines {
		byIndex[f.Index] = f
	}
	out := make([]Fault, 0, len(byIndex))
	for _, f := range byIndex {
		if f.EndMillis == 0 {
			f.EndMillis = max(endMillis, f.StartMillis)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Fault) int { return a.Index - b.Index })
	return out, nil
}
