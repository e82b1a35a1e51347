package stream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// validTopicName applies Kafka's topic name rules: 1..249 characters of
// [a-zA-Z0-9._-], not "." or "..".
func validTopicName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > 249 {
		return fmt.Errorf("length %d > 249", len(s))
	}
	if s == "." || s == ".." {
		return errors.New(`"." and ".." are reserved`)
	}
	for _, c := range s {
		ok := c == '.' || c == '_' || c == '-' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
		if !ok {
			return fmt.Errorf("character %q not in [a-zA-Z0-9._-]", c)
		}
	}
	return nil
}

// SASL mechanisms accepted by SASLConfig.Mechanism.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLConfig selects SASL authentication. The zero value disables it.
type SASLConfig struct {
	Mechanism string // "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	Username  string
	Password  string
}

// TLSConfig configures TLS to the brokers. The zero value disables TLS.
type TLSConfig struct {
	Enable bool
	// CAFile is a PEM bundle of roots; empty means the system roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and key for mutual
	// TLS; both or neither.
	CertFile string
	KeyFile  string
	// ServerName overrides the name checked against the broker certificate.
	ServerName string
	// InsecureSkipVerify disables certificate verification (tests only).
	InsecureSkipVerify bool
}

// Config says how to reach a Kafka cluster: bootstrap servers and the
// security settings shared by readers, writers and the admin client.
type Config struct {
	// Brokers are bootstrap host:port addresses; at least one.
	Brokers []string
	// ClientID is sent to the brokers. Default "cairn".
	ClientID string
	// DialTimeout bounds connection set-up including TLS and SASL.
	// Default 5s.
	DialTimeout time.Duration
	TLS         TLSConfig
	SASL        SASLConfig
	// AllowPlaintextSASL lets a SASL mechanism run without TLS (credentials and records
	// then cross the network unencrypted), for a network trusted not to be read.
	// Without it Validate refuses SASL without TLS.
	AllowPlaintextSASL bool
}

func (c Config) clientID() string {
	if c.ClientID == "" {
		return "cairn"
	}
	return c.ClientID
}

func (c Config) dialTimeout() time.Duration {
	if c.DialTimeout <= 0 {
		return 5 * time.Second
	}
	return c.DialTimeout
}

// Validate reports every problem at once; each wraps ErrConfig. It reads the
// TLS files named in the configuration, so a missing or malformed file is
// reported here rather than on the first connection.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if len(c.Brokers) == 0 {
		bad("brokers: at least one bootstrap address is required")
	}
	for i, b := range c.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" || port == "" {
			bad("brokers[%d] %q: want host:port", i, b)
		}
	}
	if c.DialTimeout < 0 {
		bad("dial_timeout %v: must not be negative", c.DialTimeout)
	}
	switch c.SASL.Mechanism {
	case "":
		if c.SASL.Username != "" || c.SASL.Password != "" {
			bad("sasl.mechanism empty but sasl.username/password set")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASL.Username == "" {
			bad("sasl.username: required for mechanism %s", c.SASL.Mechanism)
		}
		if c.SASL.Password == "" {
			bad("sasl.password: required for mechanism %s", c.SASL.Mechanism)
		}
		if !c.TLS.Enable && !c.AllowPlaintextSASL {
			bad("sasl.mechanism %s without tls.enable: the credentials would cross the network unencrypted (set tls, or allow_plaintext_sasl on a trusted network)", c.SASL.Mechanism)
		}
	default:
		bad("sasl.mechanism %q: want one of %s, %s, %s", c.SASL.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	if !c.TLS.Enable {
		if c.TLS.CAFile != "" || c.TLS.CertFile != "" || c.TLS.KeyFile != "" || c.TLS.ServerName != "" || c.TLS.InsecureSkipVerify {
			bad("tls.enable is false but other tls settings are set")
		}
	} else if _, err := c.TLS.build(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (t TLSConfig) build() (*tls.Config, error) {
	if !t.Enable {
		return nil, nil
	}
	var errs []error
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // explicit opt-in, documented as tests only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: tls.ca_file %q: %v", ErrConfig, t.CAFile, err))
		} else {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				errs = append(errs, fmt.Errorf("%w: tls.ca_file %q: no PEM certificates", ErrConfig, t.CAFile))
			}
			cfg.RootCAs = pool
		}
	}
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		errs = append(errs, fmt.Errorf("%w: tls.cert_file %q and tls.key_file %q: set both or neither", ErrConfig, t.CertFile, t.KeyFile))
	case t.CertFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: tls.cert_file %q / tls.key_file %q: %v", ErrConfig, t.CertFile, t.KeyFile, err))
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (s SASLConfig) build() (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "":
		return nil, nil
	case SASLPlain:
		return plain.Mechanism{Username: s.Username, Password: s.Password}, nil
	case SASLScramSHA256:
		return scram.Mechanism(scram.SHA256, s.Username, s.Password)
	case SASLScramSHA512:
		return scram.Mechanism(scram.SHA512, s.Username, s.Password)
	}
	return nil, fmt.Errorf("%w: sasl.mechanism %q unknown", ErrConfig, s.Mechanism)
}

// security validates c and builds its TLS and SASL settings.
func (c Config) security() (*tls.Config, sasl.Mechanism, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	tc, err := c.TLS.build()
	if err != nil {
		return nil, nil, err
	}
	mech, err := c.SASL.build()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: sasl: %v", ErrConfig, err)
	}
	return tc, mech, nil
}

// dialer builds the kafka-go Dialer used by partition readers. Its connections give a
// late fetch response ResponseSlack beyond the fetch's MaxWait (patientConn).
func (c Config) dialer() (*kafka.Dialer, error) {
	tc, mech, err := c.security()
	if err != nil {
		return nil, err
	}
	return &kafka.Dialer{
		ClientID:      c.clientID(),
		Timeout:       c.dialTimeout(),
		DialFunc:      patientDial(ResponseSlack),
		TLS:           tc,
		SASLMechanism: mech,
	}, nil
}

// transport builds a kafka-go Transport whose background goroutines stop
// when ctx is cancelled.
func (c Config) transport(ctx context.Context) (*kafka.Transport, error) {
	tc, mech, err := c.security()
	if err != nil {
		return nil, err
	}
	return &kafka.Transport{
		ClientID:    c.clientID(),
		DialTimeout: c.dialTimeout(),
		// Short metadata TTL so a restarted or re-elected broker is found
		// again quickly by retrying writers.
		MetadataTTL: 2 * time.Second,
		TLS:         tc,
		SASL:        mech,
		Context:     ctx,
	}, nil
}

// Partitions asks the cluster for the partition ids of topic, sorted.
func Partitions(ctx context.Context, cfg Config, topic string) ([]int, error) {
	tctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := cfg.transport(tctx)
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	return partitions(ctx, &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr}, topic)
}

func partitions(ctx context.Context, cl *kafka.Client, topic string) ([]int, error) {
	resp, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("stream: metadata for topic %q: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("stream: metadata for topic %q: %w", topic, t.Error)
		}
		if len(t.Partitions) == 0 {
			break
		}
		ids := make([]int, len(t.Partitions))
		for i, p := range t.Partitions {
			ids[i] = p.ID
		}
		sortInts(ids)
		return ids, nil
	}
	return nil, fmt.Errorf("%w: topic %q", ErrNoPartitions, topic)
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// EnsureTopics creates each missing topic with the given partition count and
// replication factor (-1: broker default). Existing topics are left as they
// are, whatever their partition count.
func EnsureTopics(ctx context.Context, cfg Config, partitions, replication int, topics ...string) error {
	return EnsureTopicsWithConfigs(ctx, cfg, partitions, replication, nil, topics...)
}

// EnsureTopicsWithConfigs is EnsureTopics that creates each missing topic with the
// topic-level settings configs[topic] (for example retention.ms). A topic that exists
// keeps its settings. A principal without the right to create topics (Kafka's ACL
// CREATE, which a cluster answers with an authorization error whether the topic exists
// or not) needs none for topics that exist: those the cluster refuses to create are
// looked up, and only one that is missing or not visible is an error.
func EnsureTopicsWithConfigs(ctx context.Context, cfg Config, partitions, replication int, configs map[string]map[string]string, topics ...string) error {
	if partitions < 1 {
		return fmt.Errorf("%w: partitions %d: must be at least 1", ErrConfig, partitions)
	}
	tctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := cfg.transport(tctx)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr}
	req := &kafka.CreateTopicsRequest{}
	for _, t := range topics {
		if err := validTopicName(t); err != nil {
			return fmt.Errorf("%w: topic %q: %v", ErrConfig, t, err)
		}
		tc := kafka.TopicConfig{Topic: t, NumPartitions: partitions, ReplicationFactor: replication}
		for _, k := range slices.Sorted(maps.Keys(configs[t])) {
			tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: configs[t][k]})
		}
		req.Topics = append(req.Topics, tc)
	}
	resp, err := cl.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("stream: create topics %s: %w", strings.Join(topics, ","), err)
	}
	var errs []error
	var refused []string
	for t, e := range resp.Errors {
		switch {
		case e == nil || errors.Is(e, kafka.TopicAlreadyExists):
		case errors.Is(e, kafka.TopicAuthorizationFailed) || errors.Is(e, kafka.ClusterAuthorizationFailed):
			refused = append(refused, t)
		default:
			errs = append(errs, fmt.Errorf("stream: create topic %q: %w", t, e))
		}
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		errs = append(errs, existing(ctx, cl, refused))
	}
	return errors.Join(errs...)
}

// existing checks that the topics, which this principal may not create, exist and are
// visible to it; each that is not is an error that says what to do.
func existing(ctx context.Context, cl *kafka.Client, topics []string) error {
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return fmt.Errorf("stream: topics %s: not allowed to create them, and their metadata: %w", strings.Join(topics, ","), err)
	}
	found := map[string]error{}
	for _, t := range md.Topics {
		found[t.Name] = t.Error
		if t.Error == nil && len(t.Partitions) == 0 {
			found[t.Name] = errors.New("no partitions")
		}
	}
	var errs []error
	for _, t := range topics {
		e, ok := found[t]
		if !ok {
			e = errors.New("not in the cluster's metadata")
		}
		if e != nil {
			errs = append(errs, fmt.Errorf("stream: topic %q: this principal may not create it (%w) and it is not there to use (%v): create it, or grant CREATE or DESCRIBE on it",
				t, kafka.TopicAuthorizationFailed, e))
		}
	}
	return errors.Join(errs...)
}

// TopicSetting returns the value of one setting of topic (for example
// cleanup.policy) as the cluster describes it.
func TopicSetting(ctx context.Context, cfg Config, topic, name string) (string, error) {
	tctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := cfg.transport(tctx)
	if err != nil {
		return "", err
	}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr}
	resp, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{name}}}})
	if err != nil {
		return "", fmt.Errorf("stream: describe %s of topic %q: %w", name, topic, err)
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return "", fmt.Errorf("stream: describe %s of topic %q: %w", name, topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == name {
				return e.ConfigValue, nil
			}
		}
	}
	return "", fmt.Errorf("stream: topic %q does not describe %s", topic, name)
}
