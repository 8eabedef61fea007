package chaos

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestKafkaEventsFromTheNodeLogs reads the lines of Kafka 4.4's log that
// tell a fence and a new controller, from all.log and node.log, and times
// each kind of fault against them.
func TestKafkaEventsFromTheNodeLogs(t *testing.T) {
	dir := t.TempDir()
	write := func(node, name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, "node-"+node), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "node-"+node, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("3", "all.log", "[2026-12-03 07:36:53,931] INFO [RaftManager id=3] Completed transition to Leader(localVoterNode=VoterNode(voterKey=ReplicaKey(id=3, directoryId=x), listeners=...) (org.apache.kafka.raft.QuorumState)\n"+
		"[2026-12-03 07:36:57,425] INFO [QuorumController id=3] Fencing broker 1 at epoch 11 because its session has timed out. (org.apache.kafka.controller.QuorumController)\n")
	write("3", "node.log", "not a log line\n[2026-12-03 07:40:14,462] INFO [QuorumController id=3] Fencing broker 2 at epoch 1376 because its session has timed out. (x)\n")
	events, err := ReadKafkaEvents(dir, []int32{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 3 || events[0].Kind != KafkaNewController || events[0].Broker != 3 || events[1].Kind != KafkaFenced || events[1].Broker != 1 || events[2].Broker != 2 {
		t.Fatalf("events = %+v; want the new controller 3, the fence of 1, the fence of 2", events)
	}
	at := func(clock string) int64 {
		ts, err := time.ParseInLocation("2006-01-02 15:04:05.000", "2026-12-03 "+clock, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return ts.UnixMilli()
	}
	kill := Fault{Kind: FaultCoordinatorKill, Node: 1, StartMillis: at("07:36:51.231"), HealMillis: at("07:37:20.000")}
	if got := detectionMillis(kill, events); got != 6194 {
		t.Errorf("detection of the kill of node 1 = %d ms; want 6194 (its fence)", got)
	}
	stop := Fault{Kind: FaultControllerStop, Node: 2, StartMillis: at("07:36:51.231"), HealMillis: at("07:37:20.000")}
	if got := detectionMillis(stop, events); got != 2700 {
		t.Errorf("detection of the stop of controller 2, never fenced = %d ms; want 2700 (its successor's election)", got)
	}
	rolling := Fault{Kind: FaultRollingRestart, Node: 1, StartMillis: at("07:36:51.231"), HealMillis: at("07:37:20.000")}
	if got := detectionMillis(rolling, events); got != -1 {
		t.Errorf("detection of a rolling restart = %d; want -1", got)
	}
	late := Fault{Kind: FaultStateLeaderKill, Node: 2, StartMillis: at("07:36:51.231"), HealMillis: at("07:38:00.000")}
	if got := detectionMillis(late, events); got != -1 {
		t.Errorf("detection of a kill whose fence came after the heal = %d; want -1", got)
	}
}
