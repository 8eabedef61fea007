package demo

// The cluster of demo: an embedded kfake broker in process, or the real
// cluster of --brokers in topics of the demo's own; the topics, the
// transports of the members and of the observer, and their cleanup.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/cmd/krabka-coord/internal/clifmt"
	"github.com/krabka-io/krabka-streams-go/coordination"
)

// openCluster opens the cluster of the demo: the real one of
// Options.Brokers (--brokers or KRABKA_BROKERS), in topics and under a role of the demo's own, or
// else an embedded kfake cluster of one broker, in process, under the
// default topic and role. It sets where the demo runs, and returns what
// closes the cluster.
func (d *demo) openCluster() (closeCluster func(), err error) {
	if len(d.opts.Brokers) == 0 {
		fake, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, failure("start the embedded cluster: %v", err)
		}
		d.brokers = fake.ListenAddrs()
		d.cluster = "embedded kfake (in process, 1 broker)"
		d.stateTopic, d.commands, d.defaultRole = coordination.StateTopic, "demo-commands", "controller"
		return fake.Close, nil
	}
	suffix := randomSuffix()
	d.brokers, d.kopts, d.real = d.opts.Brokers, d.opts.ClientOptions, true
	d.cluster = "Kafka at " + strings.Join(d.opts.Brokers, ",")
	d.stateTopic, d.commands = "krabka-demo-"+suffix, "krabka-demo-"+suffix+"-commands"
	d.defaultRole = "controller-demo-" + suffix
	return func() {}, nil
}

// randomSuffix names the topics and the role of a demo on a real cluster.
func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// setup creates the topics, the members and the observer.
func (d *demo) setup(ctx context.Context) error {
	setupTransport, err := coordination.NewKafkaTransportWithOptions(d.config, d.kopts, d.brokers...)
	if err != nil {
		return failure("%v", err)
	}
	defer setupTransport.Close()
	replication := 1
	if d.real {
		replication = -1
	}
	if err := setupTransport.CreateStateTopic(ctx, replication, 1, d.options...); err != nil {
		return clusterError("create the state topic: %s", clifmt.ErrText(err))
	}
	client, err := kgo.NewClient(d.clientOpts()...)
	if err != nil {
		return failure("%v", err)
	}
	defer client.Close()
	if _, err := kadm.NewClient(client).CreateTopic(ctx, 1, int16(replication), nil, d.commands); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return clusterError("create the command topic %s: %v", d.commands, err)
	}
	if err := waitPartitionReady(ctx, client, d.commands); err != nil {
		return clusterError("the command topic %s is not ready: %v", d.commands, err)
	}
	d.observer, err = coordination.NewKafkaTransportWithOptions(d.config, d.kopts, d.brokers...)
	if err != nil {
		return failure("%v", err)
	}
	for i := 1; i <= 3; i++ {
		transport, err := coordination.NewKafkaTransportWithOptions(d.config, d.kopts, d.brokers...)
		if err != nil {
			return failure("%v", err)
		}
		name := fmt.Sprintf("node-%d", i)
		id, _ := coordination.NewMemberID(name)
		d.members = append(d.members, &demoMember{d: d, name: name, id: id, transport: transport, gate: &gatedTransport{KafkaTransport: transport}})
	}
	return nil
}

func (d *demo) clientOpts() []kgo.Opt {
	return append(append([]kgo.Opt{}, d.kopts...), kgo.SeedBrokers(d.brokers...))
}

// waitPartitionReady waits until partition 0 of a new topic answers at its
// leader: a produce before that waits out franz-go's metadata min age.
func waitPartitionReady(ctx context.Context, client *kgo.Client, topic string) error {
	for {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, client)
		if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			if err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deleteTopics removes the topics of a demo on a real cluster.
func (d *demo) deleteTopics(topics ...string) {
	client, err := kgo.NewClient(d.clientOpts()...)
	if err != nil {
		return
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(client).DeleteTopics(ctx, topics...)
}

// closeTransports closes the clients of the members and of the observer.
func (d *demo) closeTransports() {
	for _, m := range d.members {
		m.transport.Close()
	}
	if d.observer != nil {
		d.observer.Close()
	}
}
