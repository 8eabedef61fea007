package coordination

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/topicname"
)

// DefaultPollInterval is the default gap between two reads of [StateTopic]
// while a member waits for a role. It also bounds the retry of a renewal
// that failed for a reason other than a fence.
const DefaultPollInterval = time.Second

// Option configures [AcquireLeadership], [DescribeRoleState], and
// [RoleTopicPartition]. An option that gets a value out of range makes the
// call return an error that names the option, before anything is read or
// written.
type Option func(*settings) error

// settings is what the options build. The three lease timings stay apart
// until every option has run, so WithLeaseDuration and WithRenewInterval
// combine in any order.
type settings struct {
	topic            string
	partitions       int
	leaseDuration    time.Duration
	renewInterval    time.Duration
	challengeStagger time.Duration
	heartbeat        time.Duration // 0: no heartbeats (the specification)
	resignAnchor     bool          // WithResignationAnchor
	duplicateCheck   bool          // WithDuplicateMemberCheck
	rivalWatch       bool          // WithRivalMintWatch
	fenced           *FencingToken // withFencedToken
	claimed          bool          // withCampaignClaimed
	pollInterval     time.Duration
	renewDeadline    time.Duration // 0: the leadership does not end on its own lease clock
	clock            Clock
	logger           *slog.Logger

	lease LeaseConfig // built by newSettings

	// A planned transfer (leadership_transfer.go).
	transferTimeout time.Duration                        // WithTransferTimeout; 0: the default (transferBound)
	successor       *func(roster []RosterEntry) MemberID // WithSuccessor; nil: the Elector resigns
}

// newSettings applies the options over the specification's defaults
// ([DefaultLeaseConfig], [StateTopic], [DefaultPartitions],
// [DefaultPollInterval], [SystemClock]) and checks the result.
func newSettings(options []Option) (*settings, error) {
	return newSettingsOver(options, LeaseConfig{})
}

// newSettingsOver is newSettings with policy, the lease policy of a
// transport ([ExtendedTransport.LeaseConfig]), as the default lease: the
// zero LeaseConfig for the specification's.
func newSettingsOver(options []Option, policy LeaseConfig) (*settings, error) {
	s, err := buildSettings(options, true, policy)
	if err != nil {
		return nil, err
	}
	return internSettings(s), nil
}

// placementSettings applies the options as newSettings does, for a call
// that only places and reads a role (RoleTopicPartition,
// DescribeRoleState): only WithTopic and WithPartitions change its answer,
// so a lease policy that the options leave inconsistent (a lease duration
// below the default renew interval, say) is no error there; each option's
// own range still is.
func placementSettings(options []Option) (*settings, error) {
	return buildSettings(options, false, LeaseConfig{})
}

// buildSettings is newSettings; checkLease says whether the lease timings
// must form a policy, and policy, when not zero, is the default lease.
func buildSettings(options []Option, checkLease bool, policy LeaseConfig) (*settings, error) {
	defaults := DefaultLeaseConfig()
	if policy != (LeaseConfig{}) {
		defaults = policy
	}
	s := &settings{
		topic:            StateTopic,
		partitions:       DefaultPartitions,
		leaseDuration:    defaults.duration,
		renewInterval:    defaults.renewInterval,
		challengeStagger: defaults.challengeStagger,
		heartbeat:        defaults.heartbeat,
		resignAnchor:     defaults.resignAnchor,
		pollInterval:     DefaultPollInterval,
		clock:            SystemClock{},
		logger:           slog.Default(),
	}
	for _, option := range options {
		if option == nil {
			return nil, errors.New("coordination: nil Option")
		}
		if err := option(s); err != nil {
			return nil, err
		}
	}
	lease, err := NewLeaseConfig(s.leaseDuration, s.renewInterval, s.challengeStagger)
	if err != nil && !checkLease {
		s.lease = defaults
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w (set by WithLeaseConfig, WithLeaseDuration, WithRenewInterval, WithChallengeStagger)", err)
	}
	if s.heartbeat > 0 {
		if lease, err = lease.WithHeartbeatInterval(s.heartbeat); err != nil {
			return nil, fmt.Errorf("%w (set by WithHeartbeatInterval)", err)
		}
	}
	if s.resignAnchor {
		lease = lease.WithResignationAnchor()
	}
	s.lease = lease
	if s.renewDeadline > 0 && (s.renewDeadline <= lease.renewInterval || s.renewDeadline >= lease.duration) {
		return nil, fmt.Errorf("coordination: WithRenewDeadline(%v): want above the renew interval %v, so that a renewal can land in time, and below the lease duration %v, so that the margin, lease duration − renew deadline, covers the clock skew and the time the work takes to stop",
			s.renewDeadline, lease.renewInterval, lease.duration)
	}
	if s.transferTimeout > 0 && s.transferTimeout >= lease.duration {
		return nil, fmt.Errorf("coordination: WithTransferTimeout(%v): want below the lease duration %v, so that the offer's lease does not lapse before the transfer ends: %w",
			s.transferTimeout, lease.duration, ErrMisconfigured)
	}
	return s, nil
}

// partition returns the partition of the role under these settings.
func (s *settings) partition(role Role) (TopicPartition, error) {
	p, err := RolePartition(role, s.partitions)
	if err != nil {
		return TopicPartition{}, err
	}
	return TopicPartition{Topic: s.topic, Partition: p}, nil
}

// positive rejects an extent at or below zero with the name of the option.
func positive(option string, extent time.Duration) error {
	if extent <= 0 {
		return fmt.Errorf("coordination: %s(%v): want an extent above zero", option, extent)
	}
	return nil
}

// WithChallengeStagger sets the extra delay that one rank of succession
// adds; the default is [DefaultChallengeStagger].
func WithChallengeStagger(stagger time.Duration) Option {
	return func(s *settings) error {
		if err := positive("WithChallengeStagger", stagger); err != nil {
			return err
		}
		s.challengeStagger = stagger
		return nil
	}
}

// WithClock reads the time from another clock than [SystemClock]; the
// default is SystemClock. A test passes [NewManualClock] and drives every
// wait by hand. It rejects a nil clock.
func WithClock(clock Clock) Option {
	return func(s *settings) error {
		if clock == nil {
			return errors.New("coordination: WithClock(nil): want a clock, such as SystemClock{}")
		}
		s.clock = clock
		return nil
	}
}

// WithLeaseConfig takes a whole lease policy; the default is
// [DefaultLeaseConfig]. It rejects the zero LeaseConfig. A later
// WithLeaseDuration, WithRenewInterval, or WithChallengeStagger changes one
// timing of it. The extensions that the config carries
// ([LeaseConfig.WithHeartbeatInterval], [LeaseConfig.WithResignationAnchor])
// come with it.
//
// Over an [ExtendedTransport] that reports a lease policy (a
// [KafkaTransport]), that policy is the default, and a campaign whose
// options give another lease duration fails with [ErrMisconfigured] (see
// the package doc, "The transport contract").
func WithLeaseConfig(config LeaseConfig) Option {
	return func(s *settings) error {
		if config == (LeaseConfig{}) {
			return errors.New("coordination: WithLeaseConfig(LeaseConfig{}): build the config with NewLeaseConfig or DefaultLeaseConfig")
		}
		s.leaseDuration, s.renewInterval, s.challengeStagger = config.duration, config.renewInterval, config.challengeStagger
		s.heartbeat, s.resignAnchor = config.heartbeat, config.resignAnchor
		return nil
	}
}

// WithHeartbeatInterval switches heartbeats on, an extension of the
// specification that is off by default: a member that waits for the role
// writes a [Heartbeat] record (kind 2 of [StateTopic]) right after its
// registration and then every interval, and a standby whose heartbeats
// stopped for [RosterLapseHeartbeats] intervals loses its rank (see
// [RoleState.RankAt]) and no longer holds back the standbys behind it. An
// entry that never heartbeated never lapses, so members of another port
// or of an older release keep the specification's ranks. Every member of a
// role passes the same interval. A shorter interval lets a dead standby's
// rank lapse sooner and costs one record of about 30 bytes per standby per
// interval.
//
// Switch it on only once every process that reads the topic decodes kind
// 2: this release and later do; a reader built from the specification
// alone (an older release, another port, a tool) rejects the record as a
// [FormatError]. In a rolling upgrade: first upgrade every member and every
// tool that reads the topic, then switch heartbeats on, member by member.
// The package doc ("Extensions and errata") says what it solves.
func WithHeartbeatInterval(interval time.Duration) Option {
	return func(s *settings) error {
		if err := positive("WithHeartbeatInterval", interval); err != nil {
			return err
		}
		s.heartbeat = interval
		return nil
	}
}

// WithResignationAnchor switches the resignation anchor on, an extension
// of the specification that is off by default (see
// [LeaseConfig.WithResignationAnchor]): after a resignation's tombstone,
// the standbys challenge in rank order, one challenge stagger apart from
// the tombstone's timestamp, instead of all at once. It reads the
// timestamp of the tombstone ([StateRecord.Timestamp]), so it needs a
// transport that reports one, as [KafkaTransport] does; with a transport
// that does not, it changes nothing.
func WithResignationAnchor() Option {
	return func(s *settings) error {
		s.resignAnchor = true
		return nil
	}
}

// WithDuplicateMemberCheck switches the duplicate-member watch on, an
// extension of the specification that is off by default. By the
// specification, a lease or a registration that names this member and that
// this call did not write came from an earlier incarnation, and
// [AcquireLeadership] challenges at once: a restart costs one epoch and no
// wait. With the watch on, the call first tells an earlier incarnation
// from a second live process under the same member id (it asks the
// coordinator, and watches the lease for a renewal), and returns an error
// that wraps [ErrDuplicateMember] instead of fencing that process or
// replacing its registration: it watches before it writes anything. So a
// restarted member whose lease is still live waits up to one renew
// interval plus one poll interval (11 s with the defaults) before it
// competes, unless its transport minted the lease's token; with
// heartbeats, one whose standby registration is not lapsed waits one
// heartbeat interval, one poll and a second. See the package doc's
// section "The campaign in detail".
func WithDuplicateMemberCheck() Option {
	return func(s *settings) error {
		s.duplicateCheck = true
		return nil
	}
}

// WithRivalMintWatch switches the rival-mint watch on, an extension of the
// specification that is off by default. A challenger of an expired lease
// first asks the transaction coordinator for the role's token
// (DescribeEpoch, one DescribeTransactions request). A token other than
// the expired lease's is another challenger's mint whose first lease has
// not landed yet, and the challenger waits for that lease as it would for a
// lease granted when it first saw the mint: one lease duration plus the
// stagger of its rank; it challenges then only if no lease under a newer
// token landed. A token that this process's own abandoned mint attempt may
// have minted ([KafkaTransport] keeps the late answer) is no rival's. A
// wait in vain counts as a mint without a lease toward a
// [*ForeignEpochError] (another application uses the role name).
//
// It asks only to challenge an expired lease: a handover after
// [Leadership.Resign] (a tombstone) and a role without a lease take the
// specification's path with no extra request, and a coordinator that cannot
// answer leaves the challenge as the specification has it. Why it exists
// (challengers that fence each other after a broker fault) and why it is
// off (a mint that never writes a lease delays the failover by a lease
// duration): see the package doc's section "Extensions and errata".
func WithRivalMintWatch() Option {
	return func(s *settings) error {
		s.rivalWatch = true
		return nil
	}
}

// withFencedToken tells a campaign that this process saw a write under
// token refused as fenced, as an [ExtendedTransport] reports it (Fenced): the
// [Elector] passes it after a fence, so that it does not fence its
// successor over a transport that records no fences.
func withFencedToken(token FencingToken) Option {
	return func(s *settings) error {
		s.fenced = &token
		return nil
	}
}

// withCampaignClaimed tells a campaign that its caller, an [Elector]'s
// Run, holds the claim of the role and member (campaign_claims.go) for
// every campaign it runs.
func withCampaignClaimed() Option {
	return func(s *settings) error {
		s.claimed = true
		return nil
	}
}

// WithLeaseDuration sets the extent of a lease; the default is
// [DefaultLeaseDuration].
func WithLeaseDuration(duration time.Duration) Option {
	return func(s *settings) error {
		if err := positive("WithLeaseDuration", duration); err != nil {
			return err
		}
		s.leaseDuration = duration
		return nil
	}
}

// WithLogger reports what a leadership does that no return value carries:
// a record of the state topic that does not decode and that the loop
// skipped, a renewal that failed and is retried, a resignation whose
// tombstone did not land. The default is [slog.Default]. It rejects nil; pass
// a logger over a discarding handler to silence it.
func WithLogger(logger *slog.Logger) Option {
	return func(s *settings) error {
		if logger == nil {
			return errors.New("coordination: WithLogger(nil): want a logger")
		}
		s.logger = logger
		return nil
	}
}

// WithPartitions sets the partition count of the coordination topic; the
// default is [DefaultPartitions]. Every member of a cluster passes the count
// that the cluster created the topic with, because the count picks the
// partition of a role. It rejects a count below one, and above
// math.MaxInt32, the largest that Kafka's int32 partition count carries.
func WithPartitions(partitions int) Option {
	return func(s *settings) error {
		if partitions < 1 || partitions > math.MaxInt32 {
			return fmt.Errorf("coordination: WithPartitions(%d): want 1 to %d partitions (a topic's partition count is a Kafka int32)", partitions, math.MaxInt32)
		}
		s.partitions = partitions
		return nil
	}
}

// WithPollInterval sets the longest gap between two reads of the
// coordination topic while a member waits; the default is
// [DefaultPollInterval]. A shorter gap finds a resigned holder sooner and
// costs more fetches. An [ExtendedTransport] wakes a waiting member on each new record, and the
// poll interval then only bounds a missed wake-up.
func WithPollInterval(interval time.Duration) Option {
	return func(s *settings) error {
		if err := positive("WithPollInterval", interval); err != nil {
			return err
		}
		s.pollInterval = interval
		return nil
	}
}

// WithRenewInterval sets the gap between two renewals by the holder; the
// default is [DefaultRenewInterval].
func WithRenewInterval(interval time.Duration) Option {
	return func(s *settings) error {
		if err := positive("WithRenewInterval", interval); err != nil {
			return err
		}
		s.renewInterval = interval
		return nil
	}
}

// WithTopic reads and writes another topic than [StateTopic]; the default
// is StateTopic. It rejects a
// name that Kafka rejects: empty, "." or "..", longer than 249 bytes, or
// with a character outside [a-zA-Z0-9._-].
func WithTopic(topic string) Option {
	return func(s *settings) error {
		if err := topicname.Check(topic); err != nil {
			return fmt.Errorf("coordination: WithTopic(%q): %w", topic, err)
		}
		s.topic = topic
		return nil
	}
}

// RoleTopicPartition returns the partition of the coordination topic that
// holds every record of the role. Only [WithTopic] and [WithPartitions]
// change the answer. It returns an error for an invalid option.
func RoleTopicPartition(role Role, options ...Option) (TopicPartition, error) {
	s, err := placementSettings(options)
	if err != nil {
		return TopicPartition{}, err
	}
	return s.partition(role)
}
