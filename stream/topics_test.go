package stream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// problems returns the "topic setting" pairs of the *TopicProblems joined in err.
func problems(t *testing.T, err error) []string {
	t.Helper()
	var out []string
	var walk func(error)
	walk = func(e error) {
		if p, ok := e.(*TopicProblem); ok {
			out = append(out, p.Topic+" "+p.Setting)
			if p.Reason == "" {
				t.Errorf("%v: no reason", p)
			}
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		if e != nil {
			t.Errorf("unexpected error %v (%T)", e, e)
		}
	}
	walk(err)
	slices.Sort(out)
	return out
}

// TestTopicRules runs CheckTopics's rules on settings as a cluster would describe them.
func TestTopicRules(t *testing.T) {
	roles := TopicRoles{Train: "tr", Models: "mo", Audits: "au", Erasures: "er"}
	good := func() map[string]topicState {
		return map[string]topicState{
			"tr": {settings: map[string]string{"cleanup.policy": "compact", "retention.ms": "604800000", "retention.bytes": "-1", "min.insync.replicas": "2"}, partitions: 4, replication: 3},
			"mo": {settings: map[string]string{"cleanup.policy": "compact", "retention.ms": "604800000", "min.insync.replicas": "1"}, partitions: 1, replication: 1},
			"au": {settings: map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1", "min.insync.replicas": "1"}, partitions: 4, replication: 1},
			"er": {settings: map[string]string{"cleanup.policy": "compact"}, partitions: 1, replication: 1},
		}
	}
	cases := []struct {
		name   string
		mutate func(map[string]topicState)
		want   []string
	}{
		{"as cairnd creates them", func(map[string]topicState) {}, nil},
		{"no erasures topic", func(s map[string]topicState) { delete(s, "er") }, nil},
		{"compact,delete with infinite retention", func(s map[string]topicState) {
			s["tr"].settings["cleanup.policy"] = "compact, delete"
			s["tr"].settings["retention.ms"] = "-1"
		}, nil},
		{"train deletes", func(s map[string]topicState) { s["tr"].settings["cleanup.policy"] = "delete" },
			[]string{"tr cleanup.policy", "tr retention.ms"}},
		{"train compact,delete with finite retention", func(s map[string]topicState) { s["tr"].settings["cleanup.policy"] = "compact,delete" },
			[]string{"tr retention.ms"}},
		{"models not compacted", func(s map[string]topicState) {
			s["mo"].settings["cleanup.policy"] = "delete"
			s["mo"].settings["retention.bytes"] = "-1"
		}, []string{"mo cleanup.policy", "mo retention.ms"}},
		{"models partitioned", func(s map[string]topicState) { st := s["mo"]; st.partitions = 3; s["mo"] = st },
			[]string{"mo partitions"}},
		{"audits compacted", func(s map[string]topicState) { s["au"].settings["cleanup.policy"] = "compact" },
			[]string{"au cleanup.policy"}},
		{"audits with a week's retention", func(s map[string]topicState) { s["au"].settings["retention.ms"] = "604800000" },
			[]string{"au retention.ms"}},
		{"audits bounded by size", func(s map[string]topicState) { s["au"].settings["retention.bytes"] = "1073741824" },
			[]string{"au retention.bytes"}},
		{"erasures not compacted", func(s map[string]topicState) { s["er"].settings["cleanup.policy"] = "" },
			[]string{"er cleanup.policy"}},
		{"min ISR above the replicas", func(s map[string]topicState) { s["au"].settings["min.insync.replicas"] = "2" },
			[]string{"au min.insync.replicas"}},
		{"audits missing", func(s map[string]topicState) { delete(s, "au") }, []string{"au partitions"}},
	}
	for _, tc := range cases {
		s := good()
		tc.mutate(s)
		err := roles.check(s)
		if got := problems(t, err); !slices.Equal(got, tc.want) {
			t.Errorf("%s: problems %q, want %q (%v)", tc.name, got, tc.want, err)
		}
		if tc.want != nil && !errors.Is(err, ErrTopicSettings) {
			t.Errorf("%s: %v does not match ErrTopicSettings", tc.name, err)
		}
	}
}

// TestCheckTopicsEmbedded runs CheckTopics against the embedded broker (kfake, over
// TCP), on topics created first with cairnd's settings and then, on a second broker,
// with other ones: kfake answers DescribeConfigs with each topic's effective settings
// (its defaults, cleanup.policy delete and retention.ms a week, where a topic sets none).
func TestCheckTopicsEmbedded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	roles := TopicRoles{Train: "c.train", Models: "c.models", Audits: "c.audits", Erasures: DefaultErasuresTopic}
	start := func(partitions int, configs map[string]map[string]string, topics ...string) *Broker {
		b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: partitions, Topics: topics, TopicConfigs: configs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}

	t.Run("cairnd's settings", func(t *testing.T) {
		b := start(1, map[string]map[string]string{
			"c.train":  {"cleanup.policy": "compact"},
			"c.models": {"cleanup.policy": "compact"},
			"c.audits": {"retention.ms": "-1", "retention.bytes": "-1"},
		}, "c.train", "c.models", "c.audits")
		if err := CheckTopics(ctx, Config{Brokers: []string{b.Addr()}}, roles); err != nil {
			t.Errorf("CheckTopics = %v, want nil (no erasures topic: not checked)", err)
		}
	})

	t.Run("other settings", func(t *testing.T) {
		b := start(2, map[string]map[string]string{
			"c.audits":           {"retention.bytes": "-1", "min.insync.replicas": "2"},
			DefaultErasuresTopic: {"cleanup.policy": "compact"},
		}, "c.train", "c.models", "c.audits", DefaultErasuresTopic)
		err := CheckTopics(ctx, Config{Brokers: []string{b.Addr()}}, roles)
		want := []string{
			"c.audits min.insync.replicas", "c.audits retention.ms",
			"c.models cleanup.policy", "c.models partitions", "c.models retention.ms",
			"c.train cleanup.policy", "c.train retention.ms",
		}
		if got := problems(t, err); !slices.Equal(got, want) {
			t.Errorf("CheckTopics problems %q, want %q\n%v", got, want, err)
		}
		if !errors.Is(err, ErrTopicSettings) || !strings.Contains(err.Error(), `topic "c.models": cleanup.policy=delete`) {
			t.Errorf("CheckTopics = %v, want ErrTopicSettings naming c.models' cleanup.policy", err)
		}
	})

	t.Run("required topic missing", func(t *testing.T) {
		b := start(1, nil, "c.train", "c.models")
		err := CheckTopics(ctx, Config{Brokers: []string{b.Addr()}}, roles)
		if err == nil || errors.Is(err, ErrTopicSettings) || !strings.Contains(err.Error(), "c.audits") {
			t.Errorf("CheckTopics = %v, want an error naming c.audits that is not a settings problem", err)
		}
	})
}

// TestAddMetadata: the metadata of the checked topics gives their partitions and least
// replication; the optional erasures topic, still being created by another process
// (settings described, metadata unknown or leaderless), is left out as absent, while
// such an error on a required topic fails the check.
func TestAddMetadata(t *testing.T) {
	r := TopicRoles{Train: "t", Models: "m", Audits: "a", Erasures: "e"}
	fresh := func() map[string]topicState {
		return map[string]topicState{"t": {}, "m": {}, "a": {}, "e": {}}
	}
	parts := []kafka.Partition{{Replicas: []kafka.Broker{{}, {}}}, {Replicas: []kafka.Broker{{}}}}
	for _, cause := range []error{kafka.UnknownTopicOrPartition, kafka.LeaderNotAvailable} {
		states := fresh()
		err := r.addMetadata(states, []kafka.Topic{{Name: "t", Partitions: parts}, {Name: "m", Partitions: parts[:1]},
			{Name: "a", Partitions: parts[:1]}, {Name: "e", Error: cause}})
		if _, ok := states["e"]; err != nil || ok || states["t"].partitions != 2 || states["t"].replication != 1 || states["m"].replication != 2 {
			t.Errorf("erasures %v: err %v, states %+v; want the erasures topic left out and the others read", cause, err, states)
		}
		states = fresh()
		if err := r.addMetadata(states, []kafka.Topic{{Name: "t", Error: cause}}); !errors.Is(err, cause) {
			t.Errorf("training topic %v: err %v, want it", cause, err)
		}
	}
	if err := r.addMetadata(fresh(), []kafka.Topic{{Name: "e", Error: kafka.TopicAuthorizationFailed}}); !errors.Is(err, kafka.TopicAuthorizationFailed) {
		t.Errorf("erasures topic not authorized: err %v, want it reported", err)
	}
}
