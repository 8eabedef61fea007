package coordination

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A lease must outlast the time that the cluster takes to notice a dead
// broker and to move its partitions, or every broker fault costs a
// leadership change. A holder whose renewal lands on a broker that just
// died renews again only when:
//
//  1. the controller has fenced the broker, broker.session.timeout.ms after
//     its last heartbeat (9 s by default), and has elected new leaders for
//     its partitions and for the transaction coordinator of the role;
//  2. the holder's client has learned the new leaders: franz-go refreshes
//     its metadata on the first refused or failed request, at most every
//     metadataMinAge, and retries;
//  3. the next renewal is due, or retried one poll interval after a failed
//     one.
//
// The broker may die just before a renewal was due, a whole renew interval
// after the last renewal that the lease deadline counts from. So a lease
// rides out the loss of one broker when
//
//	lease >= broker.session.timeout.ms + renew interval + brokerRecoveryAllowance
//
// brokerRecoveryAllowance (2 s) covers step 2, the election, and one retry;
// it is what the fault runs of docs/safety.md measured, with margin. With
// Kafka's default session timeout of 9 s and the renew interval a third of
// the lease, the shortest such lease is 16.5 s; the default lease of 30 s
// holds. A cluster with broker.session.timeout.ms = 3000 (and
// broker.heartbeat.interval.ms = 500) holds a 6 s lease renewed every 1 s.
const brokerRecoveryAllowance = 2 * time.Second

// metadataMinAge is the shortest gap between two metadata refreshes of the
// transport's clients (franz-go's default is 5 s). A refused or failed
// request triggers a refresh, so this bounds how long a client keeps
// sending to a dead broker's partitions after the controller moved them.
const metadataMinAge = 500 * time.Millisecond

// The waits of the transport's clients after a broker fault. franz-go's
// defaults suit a client that may wait: a request without a timeout of
// its own (FindCoordinator, Metadata, AddPartitionsToTxn, EndTxn,
// InitProducerId, ListOffsets) waits 10 s for an answer
// (RequestTimeoutOverhead), and a request that failed goes again after
// 250 ms, doubling up to 5 s (RetryBackoffFn). A broker that is stopped
// (SIGSTOP, a hung JVM) or cut off by a silent network still accepts a
// connection in the kernel's backlog and never answers, so every request
// sent to it held a member for the whole 10 s, longer than the renew
// interval of a 6 s lease; and a member whose requests failed a few times
// while a broker was dead waited up to 5 s after the cluster had moved the
// broker's partitions. Both cost a leadership change that the cluster did
// not need.
//
// So the transport bounds a request without a timeout of its own by the
// renew interval (between requestTimeoutFloor and franz-go's 10 s): an
// answer that comes later than a renew interval is of no use to a holder,
// whose renewal is then due again. A Produce and a Fetch keep their
// server-side timeouts, plus this overhead. A retry waits
// retryBackoffFirst, doubling up to retryBackoffMax, with franz-go's jitter
// of ±20 %. An option of the caller overrides either.
const (
	requestTimeoutFloor = time.Second
	requestTimeoutCeil  = 10 * time.Second
	retryBackoffFirst   = 50 * time.Millisecond
	retryBackoffMax     = 500 * time.Millisecond
)

// requestTimeoutOverhead returns the RequestTimeoutOverhead of the
// transport's clients for a lease policy: its renew interval, clamped to
// [requestTimeoutFloor, requestTimeoutCeil].
func requestTimeoutOverhead(lease LeaseConfig) time.Duration {
	return min(max(lease.RenewInterval(), requestTimeoutFloor), requestTimeoutCeil)
}

// retryBackoff is the RetryBackoffFn of the transport's clients: the pause
// before the retry that follows fails failures, retryBackoffFirst doubling
// up to retryBackoffMax, times a jitter in [0.8, 1.2). It is safe for
// concurrent use.
func retryBackoff(fails int) time.Duration {
	backoff := retryBackoffFirst
	for i := 1; i < fails && backoff < retryBackoffMax; i++ {
		backoff *= 2
	}
	backoff = min(backoff, retryBackoffMax)
	return time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
}

// defaultSessionTimeout is Kafka's default broker.session.timeout.ms.
const defaultSessionTimeout = 9 * time.Second

// MinLeaseForFailureDetection returns the shortest lease duration that
// rides out the loss of one broker without a leadership change, for a
// cluster whose controller fences a silent broker after sessionTimeout
// (its broker.session.timeout.ms; Kafka's default is 9 s) and a holder that
// renews every renewInterval: sessionTimeout + renewInterval + 2 s, the 2 s
// covering the election of new leaders, the client's metadata refresh and
// one retry. A shorter lease stays safe (the broker still fences a deposed
// holder), but a broker fault then costs a failover.
// [KafkaTransport.CheckStateTopic] logs a warning when the lease is
// shorter. It is a pure function, safe for concurrent use.
func MinLeaseForFailureDetection(sessionTimeout, renewInterval time.Duration) time.Duration {
	return sessionTimeout + renewInterval + brokerRecoveryAllowance
}

// warnShortLease reads broker.session.timeout.ms from the broker with id
// broker (DescribeConfigs on the BROKER resource, which needs
// DESCRIBE_CONFIGS on the cluster) and logs a warning when the lease of s
// is shorter than [MinLeaseForFailureDetection] allows. A refused or failed
// read is logged at debug level: the check is advice, and a member may lack
// the ACL without harm.
func (t *KafkaTransport) warnShortLease(ctx context.Context, s *settings, broker int32) {
	sessionTimeout, source, err := t.sessionTimeout(ctx, broker)
	if err != nil {
		s.logger.Debug("coordination: could not read the cluster's broker.session.timeout.ms to check the lease against it",
			slog.Any("error", err))
		return
	}
	least := MinLeaseForFailureDetection(sessionTimeout, s.lease.renewInterval)
	if s.lease.duration >= least {
		return
	}
	s.logger.Warn("coordination: the lease is shorter than the cluster needs to notice a dead broker and move its partitions, "+
		"so every broker fault will cost a leadership change; pick a lease of at least broker.session.timeout.ms + renew interval + 2s, "+
		"or lower broker.session.timeout.ms on the controllers",
		slog.Duration("lease", s.lease.duration), slog.Duration("renew_interval", s.lease.renewInterval),
		slog.Duration("broker_session_timeout", sessionTimeout), slog.String("broker_session_timeout_source", source),
		slog.Duration("shortest_lease", least))
}

// sessionTimeout returns the broker.session.timeout.ms that the broker
// reports, and where the value comes from ("default" when the broker omits
// it).
func (t *KafkaTransport) sessionTimeout(ctx context.Context, broker int32) (time.Duration, string, error) {
	configs, err := t.admin.DescribeBrokerConfigs(ctx, broker)
	if err != nil {
		return 0, "", err
	}
	for _, config := range configs {
		if config.Err != nil {
			return 0, "", config.Err
		}
		for _, c := range config.Configs {
			if c.Key != "broker.session.timeout.ms" || c.Value == nil {
				continue
			}
			ms, err := strconv.ParseInt(*c.Value, 10, 64)
			if err != nil || ms <= 0 {
				continue
			}
			return time.Duration(ms) * time.Millisecond, configSource(c.Source), nil
		}
	}
	return defaultSessionTimeout, "default", nil
}

// configSource names where a broker config comes from.
func configSource(source kmsg.ConfigSource) string {
	switch source {
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "static broker config"
	case kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "dynamic broker config"
	}
	return source.String()
}
