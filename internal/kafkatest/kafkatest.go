// Package kafkatest gives integration tests the address of the real Kafka that `make test`
// starts (scripts/kafka.sh, mk/infra.mk: a cluster of 3 brokers on loopback), a few helpers
// around it, and clusters of a test's own for the tests that stop brokers (StartCluster).
//
// The broker list comes from FLOWZERO_KAFKA_BROKERS. When it is unset a test is skipped, so a
// plain `go test ./...` on a laptop stays quick; but under CI=true or
// FLOWZERO_REQUIRE_SERVICES=1 the same situation fails the test, so that an integration path
// can never silently not run in `make test`.
//
// Convention: tests that need the broker live in files tagged `//go:build integration` (for
// example foo_integration_test.go), so that the unit run (`go test -race ./...`) never sees
// them. `make test` runs them through the kafka-integration target (mk/infra.mk), which starts
// a broker of its own on free ports, runs `go test -tags integration` on every package holding
// such files (store's run in store-integration, with chDB), and stops the broker on success
// and failure. By hand:
//
//	make kafka-start     # 127.0.0.1:19092
//	FLOWZERO_KAFKA_BROKERS=127.0.0.1:19092 go test -tags integration ./yourpkg/
//	make kafka-stop
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/internal/testutil"
)

// EnvBrokers names the environment variable holding the comma-separated broker list.
const EnvBrokers = "FLOWZERO_KAFKA_BROKERS"

// Required reports whether real services are mandatory (CI=true or FLOWZERO_REQUIRE_SERVICES=1):
// a test that cannot find them must fail, not skip.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("FLOWZERO_REQUIRE_SERVICES") == "1"
}

// Brokers returns the brokers of the real Kafka, skipping t when none is configured (or
// failing it when Required).
func Brokers(t testing.TB) []string {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(EnvBrokers))
	if v == "" {
		msg := EnvBrokers + " is not set: start a broker with `make kafka-start` (scripts/kafka.sh) and export " + EnvBrokers + "=127.0.0.1:19092"
		if Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var out []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Client returns a franz-go client on the test broker, closed at the end of the test.
func Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(Brokers(t)...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Topic creates a topic with a unique name starting with prefix and the given number of
// partitions (one replica), and deletes it at the end of the test. Tests sharing the broker
// never see each other's records.
func Topic(t testing.TB, prefix string, partitions int32) string {
	t.Helper()
	return createTopic(t, Client(t), prefix, partitions, 1)
}

// ReplicatedTopic is Topic with the replication factor of ReplicationFactor (3 on a cluster
// of 3 or more brokers, whose min.insync.replicas is 2), on the client's cluster.
func ReplicatedTopic(t testing.TB, cl *kgo.Client, prefix string, partitions int32) string {
	t.Helper()
	return createTopic(t, cl, prefix, partitions, ReplicationFactor(t, cl))
}

// ReplicationFactor is the replication factor tests use on the client's cluster: 3, or the
// number of brokers when there are fewer.
func ReplicationFactor(t testing.TB, cl *kgo.Client) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("kafka metadata: %v", err)
	}
	return int16(min(3, len(md.Brokers)))
}

func createTopic(t testing.TB, cl *kgo.Client, prefix string, partitions int32, rf int16) string {
	t.Helper()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := prefix + "-" + hex.EncodeToString(rnd[:])
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, rf, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	// On a cluster, a broker learns of a new topic a moment after the controller: wait until
	// the metadata show every partition with a leader.
	for {
		md, err := adm.ListTopics(ctx, name)
		if err == nil && md[name].Err == nil && len(md[name].Partitions) == int(partitions) {
			led := true
			for _, p := range md[name].Partitions {
				led = led && p.Leader >= 0 && p.Err == nil
			}
			if led {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s: metadata without its %d partitions: %v", name, partitions, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, name)
	})
	return name
}

// WaitCommitted waits until group has committed the end offset of every partition of
// topic, and returns those end offsets.
func WaitCommitted(t testing.TB, adm *kadm.Client, topic, group string) kadm.ListedOffsets {
	t.Helper()
	var ends kadm.ListedOffsets
	testutil.WaitUntil(t, "every record of "+topic+" committed by "+group, func() bool {
		var err error
		if ends, err = adm.ListEndOffsets(context.Background(), topic); err != nil {
			return false
		}
		committed, err := adm.FetchOffsets(context.Background(), group)
		if err != nil {
			return false
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := committed.Lookup(topic, o.Partition)
			done = done && ok && c.At == o.Offset
		})
		return done
	})
	return ends
}
