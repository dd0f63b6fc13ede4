package kafkatest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster is a Kafka of a test's own, started with scripts/kafka.sh on free loopback ports:
// for the tests that stop a broker, which must not disturb the tests sharing `make test`'s
// Kafka. Its nodes are numbered 1..n (their node.id).
type Cluster struct {
	script string
	env    []string
	// Brokers is the bootstrap list, every node's client address.
	Brokers []string
}

// StartCluster starts a cluster of n KRaft nodes (each broker and controller; with 3 or
// more, topics default to replication factor 3 and min.insync.replicas 2) and removes it at
// the end of the test. Like every Kafka test it is skipped, or fails when services are
// Required, when FLOWZERO_KAFKA_BROKERS is unset: the integration run is what provides Java
// and the jars.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	Brokers(t)
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("kafkatest: cannot locate scripts/kafka.sh")
	}
	c := &Cluster{
		script: filepath.Join(filepath.Dir(file), "..", "..", "scripts", "kafka.sh"),
		env:    []string{"KAFKA_PORT=auto", "KAFKA_DATA=" + t.TempDir(), fmt.Sprintf("KAFKA_BROKERS=%d", n)},
	}
	c.run(t, "start")
	t.Cleanup(func() { c.run(t, "clean") })
	c.Brokers = strings.Split(c.run(t, "status"), ",")
	return c
}

func (c *Cluster) run(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(c.script, args...)
	cmd.Env = append(os.Environ(), c.env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kafka.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// StopBroker stops node i (TERM: a clean shutdown, its leaderships move first); the others
// keep serving.
func (c *Cluster) StopBroker(t testing.TB, i int32) { c.run(t, "stop-broker", fmt.Sprint(i)) }

// StartBroker starts node i again on its data and waits until it serves.
func (c *Cluster) StartBroker(t testing.TB, i int32) { c.run(t, "start-broker", fmt.Sprint(i)) }

// Stop stops every node (the data stays); Start starts them again.
func (c *Cluster) Stop(t testing.TB)  { c.run(t, "stop") }
func (c *Cluster) Start(t testing.TB) { c.run(t, "start") }

// Client returns a franz-go client on the cluster, closed at the end of the test.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Leaders returns how many partitions of topic each node leads.
func Leaders(t testing.TB, cl *kgo.Client, topic string) map[int32]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	td, ok := md[topic]
	if !ok || td.Err != nil {
		t.Fatalf("metadata of %s: %v", topic, td.Err)
	}
	leaders := map[int32]int{}
	for _, p := range td.Partitions {
		leaders[p.Leader]++
	}
	return leaders
}
