package chaos

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Kinds of [KafkaEvent].
const (
	// KafkaFenced: the active controller fenced a broker, because its
	// session timed out (broker.session.timeout.ms) or it shut down.
	KafkaFenced = "fenced"

	// KafkaNewController: a node became the active KRaft controller.
	KafkaNewController = "new-controller"
)

// KafkaEvent is one line of a node's log that tells what Kafka itself
// noticed of a fault, and when.
type KafkaEvent struct {
	// Millis is the time of the line, in host milliseconds.
	Millis int64 `json:"at"`

	// Kind is one of the Kafka* constants.
	Kind string `json:"kind"`

	// Node is the node whose log holds the line, and Broker the broker it
	// names (the fenced broker; the new controller).
	Node   int32 `json:"node"`
	Broker int32 `json:"broker"`
}

// The lines of the log of a Kafka 4.x node that the harness reads. The
// log4j pattern of scripts/kafka-cluster.sh starts each line with the time
// in brackets, [yyyy-MM-dd HH:mm:ss,SSS], in the local time zone.
var (
	kafkaLineTime = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]`)
	kafkaFenced   = []*regexp.Regexp{
		// QuorumController, Kafka 4.4: "Fencing broker {} at epoch {} because
		// its session has timed out."
		regexp.MustCompile(`Fencing broker (\d+) at epoch \d+ because its session has timed out`),
	}
	kafkaNewController = []*regexp.Regexp{
		// RaftManager, Kafka 4.4: "Completed transition to
		// Leader(localVoterNode=VoterNode(voterKey=ReplicaKey(id=N, ...".
		regexp.MustCompile(`Completed transition to Leader\(localVoterNode=VoterNode\(voterKey=ReplicaKey\(id=(\d+)`),
		regexp.MustCompile(`Completed transition to Leader\(localId=(\d+)`),
	}
)

// ReadKafkaEvents reads the fences and the controller changes from the
// logs of the nodes of a cluster made by scripts/kafka-cluster.sh:
// node-<id>/all.log (every earlier launch) and node-<id>/node.log (the
// current one) under dir. A missing file reads as empty.
func ReadKafkaEvents(dir string, nodes []int32) ([]KafkaEvent, error) {
	var out []KafkaEvent
	for _, id := range nodes {
		for _, name := range []string{"all.log", "node.log"} {
			events, err := readKafkaLog(filepath.Join(dir, "node-"+strconv.Itoa(int(id)), name), id)
			if err != nil {
				return nil, err
			}
			out = append(out, events...)
		}
	}
	slices.SortStableFunc(out, func(a, b KafkaEvent) int { return int(a.Millis - b.Millis) })
	return out, nil
}

func readKafkaLog(path string, node int32) ([]KafkaEvent, error) {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var out []KafkaEvent
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		m := kafkaLineTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ev, ok := kafkaEventOf(line)
		if !ok {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02 15:04:05,000", m[1], time.Local)
		if err != nil {
			continue
		}
		ev.Millis, ev.Node = at.UnixMilli(), node
		if ev.Kind == KafkaNewController && ev.Broker < 0 {
			ev.Broker = node
		}
		out = append(out, ev)
	}
	return out, scanner.Err()
}

func kafkaEventOf(line string) (KafkaEvent, bool) {
	for _, re := range kafkaFenced {
		if m := re.FindStringSubmatch(line); m != nil {
			id, _ := strconv.ParseInt(m[1], 10, 32)
			return KafkaEvent{Kind: KafkaFenced, Broker: int32(id)}, true
		}
	}
	for _, re := range kafkaNewController {
		if m := re.FindStringSubmatch(line); m != nil {
			ev := KafkaEvent{Kind: KafkaNewController, Broker: -1}
			if len(m) > 1 {
				id, _ := strconv.ParseInt(m[1], 10, 32)
				ev.Broker = int32(id)
			}
			return ev, true
		}
	}
	return KafkaEvent{}, false
}

// detectionMillis returns how long after the start of a cluster fault
// Kafka noticed it: the first fence of the node that was killed, stopped
// or cut, by the active controller (for the stop of the active controller,
// by its successor, once elected; the stopped node's partitions move only
// then), or, for a stopped controller whose broker the logs never show
// fenced, the election of its successor. It returns -1 when Kafka noticed
// nothing before the heal (a rolling restart is graceful: nothing to
// detect; a cut of the members' path to a node is invisible to Kafka).
func detectionMillis(f Fault, events []KafkaEvent) int64 {
	until := max(f.HealMillis, f.EndMillis)
	elected := int64(-1)
	for _, ev := range events {
		if ev.Millis < f.StartMillis || ev.Millis > until {
			continue
		}
		switch f.Kind {
		case FaultCoordinatorKill, FaultStateLeaderKill, FaultBrokerCut, FaultControllerStop:
			if ev.Kind == KafkaFenced && ev.Broker == f.Node {
				return ev.Millis - f.StartMillis
			}
			if f.Kind == FaultControllerStop && ev.Kind == KafkaNewController && ev.Broker != f.Node && elected < 0 {
				elected = ev.Millis - f.StartMillis
			}
		}
	}
	return elected
}
