package stream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEnsureTopicsWithoutCreate: on a cluster with ACLs, a principal allowed to use a
// topic but not to create topics passes EnsureTopics for a topic that exists (Kafka
// answers its create with an authorization error all the same), is refused with a clear
// error for one that does not, and creates one it has CREATE on.
func TestEnsureTopicsWithoutCreate(t *testing.T) {
	topicACL := func(name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(SASLPlain, "admin", "admin"), kfake.SeedTopics(2, "t.exists"),
		kfake.User(SASLPlain, "app", "s3cret",
			topicACL("t.exists", kmsg.ACLOperationDescribe), topicACL("t.exists", kmsg.ACLOperationRead), topicACL("t.exists", kmsg.ACLOperationWrite),
			topicACL("t.new", kmsg.ACLOperationCreate), topicACL("t.new", kmsg.ACLOperationDescribe)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	app := Config{Brokers: c.ListenAddrs(), SASL: SASLConfig{Mechanism: SASLPlain, Username: "app", Password: "s3cret"}, AllowPlaintextSASL: true}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if err := EnsureTopics(ctx, app, 2, -1, "t.exists"); err != nil {
		t.Errorf("an existing topic the principal may use but not create: %v", err)
	}
	err = EnsureTopics(ctx, app, 2, -1, "t.exists", "t.missing")
	if !errors.Is(err, kafka.TopicAuthorizationFailed) || !strings.Contains(err.Error(), `"t.missing"`) || strings.Contains(err.Error(), `"t.exists"`) {
		t.Errorf("a missing topic the principal may not create: got %v, want an authorization error naming t.missing alone", err)
	}
	if err := EnsureTopics(ctx, app, 2, -1, "t.new"); err != nil {
		t.Errorf("a topic the principal may create: %v", err)
	}
	if err := EnsureTopics(ctx, app, 2, -1, "t.new"); err != nil {
		t.Errorf("that topic again, now that it exists: %v", err)
	}
}
