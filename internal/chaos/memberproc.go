package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// MemberProcess is the body of the "member" mode: it reads run.json from
// dir, connects a [coordination.KafkaTransport] whose every connection to a
// broker goes to the member's proxy of that broker (proxy is the text of
// [Routes]: broker=proxy pairs, or one proxy for every broker), and runs a
// [Member] until ctx ends. It prints the member's events on stdout.
func MemberProcess(ctx context.Context, dir, id string, incarnation int, proxy string, stdout, stderr io.Writer) error {
	info, err := ReadRunInfo(dir)
	if err != nil {
		return err
	}
	lease, err := coordination.NewLeaseConfig(info.Lease, info.Renew, info.Stagger)
	if err != nil {
		return err
	}
	clock := &SkewClock{}
	if offset, err := ReadClockFile(info.MemberPath(id, "clock")); err == nil {
		clock.SetOffset(offset)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { clock.Follow(ctx, info.MemberPath(id, "clock"), 100*time.Millisecond) })

	routes, err := ParseRoutes(proxy)
	if err != nil {
		return fmt.Errorf("--proxy: %w", err)
	}
	seeds := info.Brokers
	if len(info.Nodes) > 0 {
		seeds = nil
		for _, n := range info.Nodes {
			seeds = append(seeds, n.Addr)
		}
	}
	transport, err := coordination.NewKafkaTransportWithOptions(lease,
		[]kgo.Opt{kgo.Dialer(routes.Dial), kgo.ClientID(fmt.Sprintf("krabka-chaos-%s-%d", id, incarnation))},
		seeds...)
	if err != nil {
		return err
	}
	calls, err := OpenLineLog(info.MemberPath(id, "calls"), nil)
	if err != nil {
		transport.Close()
		return err
	}
	defer calls.Close()
	var member *Member
	defer func() {
		if member == nil {
			transport.Close()
			return
		}
		_ = member.Timed(context.Background(), CallClose, "", func(context.Context) error {
			transport.Close()
			return nil
		})
	}()

	acks, err := OpenLineLog(info.MemberPath(id, "acks"), nil)
	if err != nil {
		return err
	}
	defer acks.Close()
	events, err := OpenLineLog(info.MemberPath(id, "events"), stdout)
	if err != nil {
		return err
	}
	defer events.Close()
	history, err := OpenLineLog(info.MemberPath(id, "history"), nil)
	if err != nil {
		return err
	}
	defer history.Close()
	logger := slog.New(slog.NewTextHandler(stderr, nil)).With(slog.String("member", id), slog.Int("inc", incarnation))
	member, err = NewMember(MemberConfig{
		ID:              id,
		Incarnation:     incarnation,
		Roles:           info.Roles,
		CommandTopic:    info.CommandTopic,
		Spread:          info.CommandSpread,
		Options:         memberOptions(info, lease, clock, logger),
		Clock:           clock,
		CommandInterval: info.CommandInterval,
		WriteTimeout:    info.WriteTimeout,
		RetryInterval:   info.Poll,
		Acks:            acks,
		Events:          events,
		Calls:           calls,
		History:         history,
		Successor:       func() string { return successorOf(info.MemberPath(id, "successor")) },
		TransferRequest: func() string { return takeRequest(info.MemberPath(id, "transfer")) },
	})
	if err != nil {
		return err
	}
	return member.Run(ctx, transport)
}

// WatchStdin cancels when the standard input reaches its end: the
// orchestrator holds the other end of the pipe, so a member learns of the
// death of its orchestrator even where Pdeathsig does not reach. The
// goroutine it starts ends with the input.
func WatchStdin(cancel context.CancelFunc) {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
}

// memberOptions are the library options of a member: the run's timings,
// topic and clock, and heartbeats and the rival-mint watch only when the
// run switches them on (RunInfo.Heartbeat, RunInfo.RivalWatch,
// RunInfo.ResignationAnchor); every other
// extension stays at the specification's default (off).
func memberOptions(info *RunInfo, lease coordination.LeaseConfig, clock coordination.Clock, logger *slog.Logger) []coordination.Option {
	options := []coordination.Option{
		coordination.WithLeaseConfig(lease),
		coordination.WithTopic(info.StateTopic),
		coordination.WithPartitions(info.StatePartitions),
		coordination.WithPollInterval(info.Poll),
		coordination.WithClock(clock),
		coordination.WithLogger(logger),
	}
	if info.Heartbeat > 0 {
		options = append(options, coordination.WithHeartbeatInterval(info.Heartbeat))
	}
	if info.RivalWatch {
		options = append(options, coordination.WithRivalMintWatch())
	}
	if info.ResignationAnchor {
		options = append(options, coordination.WithResignationAnchor())
	}
	return options
}
