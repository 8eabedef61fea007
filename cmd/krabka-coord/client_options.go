package main

// The connection flags as franz-go options: the seed brokers of --brokers
// or KRABKA_BROKERS, TLS, and SASL.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// brokerList returns the seed brokers of --brokers or KRABKA_BROKERS.
func (g *globals) brokerList() ([]string, error) {
	value := g.brokers
	if !g.flags.Changed("brokers") {
		value = g.getenv(envBrokers)
	}
	var brokers []string
	for b := range strings.SplitSeq(value, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		return nil, usageError("no brokers: pass --brokers host:port[,host:port...] or set %s", envBrokers)
	}
	for _, b := range brokers {
		if problem := brokerAddrProblem(b); problem != "" {
			where := "--brokers"
			if !g.flags.Changed("brokers") {
				where = "$" + envBrokers
			}
			return nil, usageError("%s: broker %q: %s; want host:port, such as 127.0.0.1:9092", where, b, problem)
		}
	}
	return brokers, nil
}

// brokerAddrProblem says what is wrong with one seed broker's address, or
// "": a port, when given, is a number from 1 to 65535. A host alone is
// franz-go's host:9092.
func brokerAddrProblem(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "" // a host without a port, or a form that franz-go parses
	}
	n, err := strconv.Atoi(port)
	switch {
	case port == "":
		return "empty port"
	case err != nil:
		return fmt.Sprintf("port %q is not a number", port)
	case n < 1 || n > 65535:
		return fmt.Sprintf("port %d out of range 1-65535", n)
	}
	return ""
}

// brokersGiven reports whether --brokers or KRABKA_BROKERS names a cluster.
func (g *globals) brokersGiven() bool {
	if g.flags.Changed("brokers") {
		return true
	}
	return strings.TrimSpace(g.getenv(envBrokers)) != ""
}

// clientOptions builds the franz-go options of the TLS and SASL flags.
func (g *globals) clientOptions() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.DialTimeout(g.connectTimeout)}
	if g.dial != nil {
		opts = append(opts, kgo.Dialer(g.dial))
	}
	tlsConfig, err := g.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsConfig))
	}
	mechanism, err := g.saslOption()
	if err != nil {
		return nil, err
	}
	if mechanism != nil {
		opts = append(opts, mechanism)
	}
	if g.verbose {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(g.stderr, kgo.LogLevelWarn, func() string { return "kgo: " })))
	}
	return opts, nil
}

// tlsConfig builds the TLS config of the --tls flags, nil without TLS.
func (g *globals) tlsConfig() (*tls.Config, error) {
	if !g.tls && g.tlsCA == "" && g.tlsCert == "" && g.tlsKey == "" && g.tlsServerName == "" {
		return nil, nil
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: g.tlsServerName}
	if g.tlsCA != "" {
		pem, err := os.ReadFile(g.tlsCA)
		if err != nil {
			return nil, usageError("--tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageError("--tls-ca %s: no PEM certificate in the file", g.tlsCA)
		}
		config.RootCAs = pool
	}
	switch {
	case g.tlsCert != "" && g.tlsKey != "":
		cert, err := tls.LoadX509KeyPair(g.tlsCert, g.tlsKey)
		if err != nil {
			return nil, usageError("--tls-cert/--tls-key: %v", err)
		}
		config.Certificates = []tls.Certificate{cert}
	case g.tlsCert != "" || g.tlsKey != "":
		return nil, usageError("--tls-cert and --tls-key go together: pass both for mutual TLS, or neither")
	}
	return config, nil
}

// saslOption builds the SASL option of the --sasl flags, nil without SASL.
func (g *globals) saslOption() (kgo.Opt, error) {
	password := g.saslPassword
	if !g.flags.Changed("sasl-password") {
		password = g.getenv(envSASLPassword)
	}
	if g.saslMechanism == "" {
		if g.saslUser != "" || g.flags.Changed("sasl-password") {
			return nil, usageError("--sasl-user and --sasl-password need --sasl-mechanism plain, scram-sha-256 or scram-sha-512")
		}
		return nil, nil
	}
	switch strings.ToLower(g.saslMechanism) {
	case "plain", "scram-sha-256", "scram-sha-512":
	default:
		return nil, usageError("--sasl-mechanism %q: want plain, scram-sha-256 or scram-sha-512", g.saslMechanism)
	}
	if g.saslUser == "" {
		return nil, usageError("--sasl-mechanism %s needs --sasl-user (and --sasl-password or $%s)", g.saslMechanism, envSASLPassword)
	}
	if password == "" {
		return nil, usageError("--sasl-mechanism %s needs a password: pass --sasl-password or set $%s", g.saslMechanism, envSASLPassword)
	}
	switch strings.ToLower(g.saslMechanism) {
	case "plain":
		return kgo.SASL(plain.Auth{User: g.saslUser, Pass: password}.AsMechanism()), nil
	case "scram-sha-256":
		return kgo.SASL(scram.Auth{User: g.saslUser, Pass: password}.AsSha256Mechanism()), nil
	case "scram-sha-512":
		return kgo.SASL(scram.Auth{User: g.saslUser, Pass: password}.AsSha512Mechanism()), nil
	}
	return nil, usageError("--sasl-mechanism %q: want plain, scram-sha-256 or scram-sha-512", g.saslMechanism)
}
