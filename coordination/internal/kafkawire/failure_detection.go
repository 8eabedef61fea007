package kafkawire

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/backoff"
)

// This file holds how the wire notices a broker fault: the waits of its
// clients, and the broker.session.timeout.ms that the cluster reports.
//
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
//     MetadataMinAge, and retries;
//  3. the next renewal is due, or retried one poll interval after a failed
//     one.
//
// The broker may die just before a renewal was due, a whole renew interval
// after the last renewal that the lease deadline counts from. So a lease
// rides out the loss of one broker when
//
//	lease >= broker.session.timeout.ms + renew interval + BrokerRecoveryAllowance

// BrokerRecoveryAllowance (2 s) covers step 2 above, the election, and one
// retry; it is what the fault runs of docs/safety.md measured, with margin.
// With Kafka's default session timeout of 9 s and the renew interval a
// third of the lease, the shortest such lease is 16.5 s.
const BrokerRecoveryAllowance = 2 * time.Second

// MetadataMinAge is the shortest gap between two metadata refreshes of the
// wire's clients (franz-go's default is 5 s). A refused or failed request
// triggers a refresh, so this bounds how long a client keeps sending to a
// dead broker's partitions after the controller moved them.
const MetadataMinAge = 500 * time.Millisecond

// The waits of the wire's clients after a broker fault. franz-go's
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
// So the wire bounds a request without a timeout of its own by the renew
// interval (between requestTimeoutFloor and franz-go's 10 s): an answer
// that comes later than a renew interval is of no use to a holder, whose
// renewal is then due again. A Produce and a Fetch keep their server-side
// timeouts, plus this overhead. A retry waits retryBackoffFirst, doubling
// up to retryBackoffMax, with franz-go's jitter of ±20 %. An option of the
// caller overrides either.
const (
	requestTimeoutFloor = time.Second
	requestTimeoutCeil  = 10 * time.Second
	retryBackoffFirst   = 50 * time.Millisecond
	retryBackoffMax     = 500 * time.Millisecond
)

// RequestTimeoutOverhead returns the RequestTimeoutOverhead of the wire's
// clients for a renew interval: the interval, clamped to 1-10 s. It is a
// pure function.
func RequestTimeoutOverhead(renewInterval time.Duration) time.Duration {
	return min(max(renewInterval, requestTimeoutFloor), requestTimeoutCeil)
}

// RetryBackoff is the RetryBackoffFn of the wire's clients: the pause
// before the retry that follows fails failures, 50 ms doubling up to
// 500 ms, times a jitter in [0.8, 1.2). It is safe for concurrent use.
func RetryBackoff(fails int) time.Duration {
	return backoff.Jitter(backoff.After(retryBackoffFirst, retryBackoffMax, fails), 0.2)
}

// DefaultSessionTimeout is Kafka's default broker.session.timeout.ms.
const DefaultSessionTimeout = 9 * time.Second

// SessionTimeout returns the broker.session.timeout.ms that the broker with
// id broker reports (DescribeConfigs on the BROKER resource, which needs
// DESCRIBE_CONFIGS on the cluster), and where the value comes from:
// "default" when the broker omits it, "static broker config" or "dynamic
// broker config". It returns the error of the request or of the resource,
// unclassified: the check is advice.
func (w *Wire) SessionTimeout(ctx context.Context, broker int32) (time.Duration, string, error) {
	configs, err := w.admin.DescribeBrokerConfigs(ctx, broker)
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
	return DefaultSessionTimeout, "default", nil
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
