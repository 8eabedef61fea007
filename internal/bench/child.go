package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// The figures of a process's own cost (CPU, bytes, memory, connections)
// come from a child process, so that nothing of the parent's other work
// counts. The child is this same binary, started with ChildFlag and a mode;
// it reads its arguments as JSON on stdin and writes its result as JSON on
// stdout.

// ChildFlag is the flag that makes cmd/krabka-bench a child.
const ChildFlag = "-bench-child"

// ChildArgs are the arguments of every child mode.
type ChildArgs struct {
	Brokers []string `json:"brokers,omitempty"`
	Etcd    []string `json:"etcd,omitempty"`
	Topic   string   `json:"topic,omitempty"`
	Prefix  string   `json:"prefix,omitempty"` // etcd election prefix
	Role    string   `json:"role,omitempty"`
	Member  string   `json:"member,omitempty"`
	Roles   int      `json:"roles,omitempty"`
	// Lease is duration, renew interval, stagger.
	Lease  [3]time.Duration `json:"lease"`
	Warm   time.Duration    `json:"warm"`
	Window time.Duration    `json:"window"`
	Fill   int64            `json:"fill,omitempty"` // records in the partition, for the report
}

// ChildResult is what a child reports.
type ChildResult struct {
	CPUPercent    float64 `json:"cpu_percent"`     // of one core, over the window
	BytesReadMin  float64 `json:"bytes_read_min"`  // bytes read from the server per minute
	BytesWriteMin float64 `json:"bytes_write_min"` // bytes written to the server per minute
	RequestsMin   float64 `json:"requests_min"`    // requests per minute (Kafka)
	RSS           int64   `json:"rss"`
	Heap          int64   `json:"heap"`
	Connections   int     `json:"connections"`
	Goroutines    int     `json:"goroutines"`
	Setup         float64 `json:"setup_seconds"` // time to reach the measured state
	// LateRenewals counts the leaderships whose last renewal was older than
	// the renew interval plus a second at a sample of the renewal window,
	// or that ended (roles-kafka); MaxRenewalAge is the oldest last
	// renewal seen, in seconds.
	LateRenewals  int     `json:"late_renewals,omitempty"`
	MaxRenewalAge float64 `json:"max_renewal_age_seconds,omitempty"`
	// GoroutinesMin and GoroutinesMax are the fewest and the most
	// goroutines at the samples of the renewal window (roles-kafka): the
	// renewals in flight come and go.
	GoroutinesMin int    `json:"goroutines_min,omitempty"`
	GoroutinesMax int    `json:"goroutines_max,omitempty"`
	Error         string `json:"error,omitempty"`
}

// Spawn runs this binary as a child in mode and returns its result.
func Spawn(ctx context.Context, mode string, args ChildArgs) (ChildResult, error) {
	self, err := os.Executable()
	if err != nil {
		return ChildResult{}, err
	}
	in, err := json.Marshal(args)
	if err != nil {
		return ChildResult{}, err
	}
	cmd := exec.CommandContext(ctx, self, ChildFlag, mode)
	cmd.Stdin = bytes.NewReader(in)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return ChildResult{}, fmt.Errorf("child %s: %w: %s", mode, err, errOut.String())
	}
	var result ChildResult
	if err := json.Unmarshal(out.Bytes(), &result); err != nil {
		return ChildResult{}, fmt.Errorf("child %s: %w: %q", mode, err, out.String())
	}
	if result.Error != "" {
		return result, fmt.Errorf("child %s: %s", mode, result.Error)
	}
	return result, nil
}

// RunChild is the main of a child: it runs mode and prints the result.
func RunChild(mode string) {
	var args ChildArgs
	var result ChildResult
	childMode = mode
	if os.Getenv(HeapProfileEnv) != "" {
		runtime.MemProfileRate = 256 // a profile fine enough for a few hundred bytes a role
	}
	err := json.NewDecoder(os.Stdin).Decode(&args)
	if err == nil {
		switch mode {
		case "idle-kafka":
			result, err = idleKafka(args)
		case "idle-etcd":
			result, err = idleEtcd(args)
		case "roles-kafka":
			result, err = rolesKafka(args)
		case "roles-etcd":
			result, err = rolesEtcd(args)
		default:
			err = fmt.Errorf("unknown child mode %q", mode)
		}
	}
	if err != nil {
		result.Error = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(result)
	os.Exit(0)
}

// byteCounter counts the bytes and requests of every kgo client of a
// transport.
type byteCounter struct{ read, written, requests atomic.Int64 }

func (c *byteCounter) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, n int, _, _ time.Duration, _ error) {
	c.read.Add(int64(n))
}

func (c *byteCounter) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, n int, _, _ time.Duration, _ error) {
	c.written.Add(int64(n))
	c.requests.Add(1)
}

// measure samples CPU and the counters over the window.
func measure(window time.Duration, read, written, requests func() int64) ChildResult {
	runtime.GC()
	cpu0, r0, w0, q0, t0 := CPUTime(), read(), written(), requests(), time.Now()
	time.Sleep(window)
	cpu1, r1, w1, q1, elapsed := CPUTime(), read(), written(), requests(), time.Since(t0)
	perMin := time.Minute.Seconds() / elapsed.Seconds()
	return ChildResult{
		CPUPercent:    100 * float64(cpu1-cpu0) / float64(elapsed),
		BytesReadMin:  float64(r1-r0) * perMin,
		BytesWriteMin: float64(w1-w0) * perMin,
		RequestsMin:   float64(q1-q0) * perMin,
		RSS:           RSSBytes(),
		Goroutines:    runtime.NumGoroutine(),
	}
}

func leaseOf(args ChildArgs) (coordination.LeaseConfig, error) {
	return coordination.NewLeaseConfig(args.Lease[0], args.Lease[1], args.Lease[2])
}

// idleKafka is one idle standby: it campaigns for a role that another
// process holds, and is measured while it waits.
func idleKafka(args ChildArgs) (ChildResult, error) {
	start := time.Now()
	lease, err := leaseOf(args)
	if err != nil {
		return ChildResult{}, err
	}
	counter := new(byteCounter)
	t, err := coordination.NewKafkaTransportWithOptions(lease, []kgo.Opt{kgo.WithHooks(counter)}, args.Brokers...)
	if err != nil {
		return ChildResult{}, err
	}
	defer t.Close()
	role, err := coordination.NewRole(args.Role)
	if err != nil {
		return ChildResult{}, err
	}
	member, err := coordination.NewMemberID(args.Member)
	if err != nil {
		return ChildResult{}, err
	}
	options := []coordination.Option{coordination.WithTopic(args.Topic), coordination.WithPartitions(1),
		coordination.WithLeaseConfig(lease), coordination.WithLogger(Discard)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := campaign(ctx, t, role, member, options)
	// Wait until the campaign's own registration is in the transport's
	// view: the standby has read the whole partition and waits. The check
	// reads the role's records, as the campaign does (ReadRolesFrom), so
	// it costs the standby's memory nothing: the transport keeps the
	// records of the role only, not the args.Fill records of the dummy
	// role.
	tp := coordination.TopicPartition{Topic: args.Topic, Partition: 0}
	builder := coordination.NewRoleStateBuilder(role)
	for from := int64(0); ; {
		records, next, err := t.ReadRolesFrom(ctx, tp, []coordination.Role{role}, from)
		if err != nil {
			return ChildResult{}, err
		}
		for _, r := range records {
			_ = builder.Apply(r)
		}
		from = next
		if _, ok := builder.Build().Entry(member); ok {
			break
		}
		select {
		case r := <-done:
			return ChildResult{}, fmt.Errorf("the standby returned: %w", r.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	setup := time.Since(start)
	time.Sleep(args.Warm)
	result := measure(args.Window, counter.read.Load, counter.written.Load, counter.requests.Load)
	result.Setup = setup.Seconds()
	result.Heap = HeapInuse()
	debug.FreeOSMemory() // RSS without the garbage of the catch-up
	result.RSS = RSSBytes()
	select {
	case r := <-done:
		return result, fmt.Errorf("the standby returned during the window: %w", r.err)
	default:
	}
	return result, nil
}

// countingConn counts the bytes of one gRPC connection.
type countingConn struct {
	net.Conn
	read, written *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

func countingEtcdClient(endpoints []string, read, written *atomic.Int64) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, address string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", address)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: conn, read: read, written: written}, nil
		})},
	})
}

// etcdSession opens an etcd client that counts its bytes, and one session
// whose lease TTL is the first lease of args. On an error it closes what it
// opened.
func etcdSession(args ChildArgs, read, written *atomic.Int64) (*clientv3.Client, *concurrency.Session, error) {
	c, err := countingEtcdClient(args.Etcd, read, written)
	if err != nil {
		return nil, nil, err
	}
	s, err := concurrency.NewSession(c, concurrency.WithTTL(int(args.Lease[0]/time.Second)))
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, s, nil
}

// idleEtcd is one idle standby of etcd's election: a session and a
// Campaign that waits behind another process's leader key.
func idleEtcd(args ChildArgs) (ChildResult, error) {
	start := time.Now()
	var read, written atomic.Int64
	c, s, err := etcdSession(args, &read, &written)
	if err != nil {
		return ChildResult{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := etcdCampaign(ctx, concurrency.NewElection(s, args.Prefix), "standby")
	if err := waitCandidates(ctx, c, args.Prefix, 2); err != nil {
		return ChildResult{}, err
	}
	setup := time.Since(start)
	time.Sleep(args.Warm)
	zero := func() int64 { return 0 }
	result := measure(args.Window, read.Load, written.Load, zero)
	result.Setup = setup.Seconds()
	result.Heap = HeapInuse()
	select {
	case r := <-done:
		return result, fmt.Errorf("the standby returned during the window: %w", r.err)
	default:
	}
	return result, nil
}

// rolesKafka holds args.Roles roles in one process, over one transport,
// and reports its memory and its connections to the broker.
func rolesKafka(args ChildArgs) (ChildResult, error) {
	start := time.Now()
	lease, err := leaseOf(args)
	if err != nil {
		return ChildResult{}, err
	}
	t, err := coordination.NewKafkaTransport(lease, args.Brokers...)
	if err != nil {
		return ChildResult{}, err
	}
	defer t.Close()
	options := []coordination.Option{coordination.WithTopic(args.Topic), coordination.WithPartitions(16),
		coordination.WithLeaseConfig(lease), coordination.WithLogger(Discard)}
	member, err := coordination.NewMemberID("holder")
	if err != nil {
		return ChildResult{}, err
	}
	leaderships := make([]*coordination.Leadership, args.Roles)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	result, err := holdRoles(args, start, PortOf(args.Brokers[0]), func(i int) error {
		role, err := coordination.NewRole(fmt.Sprintf("%s-%05d", args.Role, i))
		if err != nil {
			return err
		}
		leaderships[i], err = coordination.AcquireLeadership(ctx, t, role, member, options...)
		return err
	})
	if err != nil {
		return result, err
	}
	result.LateRenewals, result.MaxRenewalAge, result.GoroutinesMin, result.GoroutinesMax = renewalsOnTime(leaderships, lease, args.Window)
	for _, l := range leaderships {
		select {
		case <-l.Done():
			return result, fmt.Errorf("role %s ended: %w", l.Role(), l.Err())
		default:
		}
	}
	return result, nil
}

// renewalsOnTime watches the leaderships for window, sampling once a
// second how old the last renewal of each is. It returns how many were
// late at a sample (older than the renew interval plus a second) or had
// ended, the oldest last renewal seen, in seconds, and the fewest and the
// most goroutines of the process at the samples.
func renewalsOnTime(leaderships []*coordination.Leadership, lease coordination.LeaseConfig, window time.Duration) (late int, maxAge float64, minGoroutines, maxGoroutines int) {
	bound := lease.RenewInterval() + time.Second
	wasLate := make([]bool, len(leaderships))
	minGoroutines = runtime.NumGoroutine()
	maxGoroutines = minGoroutines
	for end := time.Now().Add(window); time.Now().Before(end); {
		time.Sleep(time.Second)
		n := runtime.NumGoroutine()
		minGoroutines, maxGoroutines = min(minGoroutines, n), max(maxGoroutines, n)
		now := time.Now().UnixMilli()
		for i, l := range leaderships {
			age := time.Duration(now-l.Lease().GrantedAt) * time.Millisecond
			maxAge = max(maxAge, age.Seconds())
			ended := false
			select {
			case <-l.Done():
				ended = true
			default:
			}
			if (age > bound || ended) && !wasLate[i] {
				wasLate[i] = true
				late++
			}
		}
	}
	return late, maxAge, minGoroutines, maxGoroutines
}

// rolesEtcd holds args.Roles elections in one process, over one client and
// one session.
func rolesEtcd(args ChildArgs) (ChildResult, error) {
	start := time.Now()
	var read, written atomic.Int64
	c, s, err := etcdSession(args, &read, &written)
	if err != nil {
		return ChildResult{}, err
	}
	defer c.Close()
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return holdRoles(args, start, PortOf(args.Etcd[0]), func(i int) error {
		return concurrency.NewElection(s, fmt.Sprintf("%s/%05d/", args.Prefix, i)).Campaign(ctx, "holder")
	})
}

// RolesAtOnce is how many roles holdRoles acquires at a time, on Kafka and
// etcd alike: a process that holds thousands of roles acquires them
// concurrently, and the transport sends their requests over one client, so
// the broker, not the caller, bounds the rate (issue 19, item 5; it was 64).
const RolesAtOnce = 256

// holdRoles takes args.Roles roles with acquire, RolesAtOnce at a time,
// waits args.Warm, and measures the process: memory, goroutines, and the
// connections to the server on port.
func holdRoles(args ChildArgs, start time.Time, port int, acquire func(i int) error) (ChildResult, error) {
	errs := make([]error, args.Roles)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(RolesAtOnce, args.Roles) {
		wg.Go(func() {
			for i := range work {
				errs[i] = acquire(i)
			}
		})
	}
	for i := range args.Roles {
		work <- i
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return ChildResult{}, err
	}
	setup := time.Since(start)
	time.Sleep(args.Warm)
	result := ChildResult{Setup: setup.Seconds(), Heap: HeapInuse(), RSS: RSSBytes(), Goroutines: runtime.NumGoroutine()}
	var err error
	result.Connections, err = TCPConnections(port)
	return result, err
}
