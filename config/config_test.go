package config

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/fit"
)

func TestDefaultValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v, want nil", err)
	}
	if c.DataDir != "./cairn-data" || c.Kafka.EmbeddedBroker != "127.0.0.1:9092" || c.HTTP != "127.0.0.1:8080" {
		t.Errorf("operator-contract defaults changed: %+v", c)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Default()
	c.Sketch.H = 0
	c.Query.Delta = 1.5
	c.Fit.Loss = "mse"
	c.Kafka.Topics.Audits = c.Kafka.Topics.Train
	c.HTTP = "nonsense"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil for five bad fields")
	}
	for _, path := range []string{"sketch.h", "query.delta", "fit.loss", "kafka.topics.audits", "http"} {
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error does not name %s:\n%v", path, err)
		}
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Errorf("error is not a *FieldError: %T", err)
	}
}

// TestFitLossNames: fit.loss accepts exactly the names fit.ParseLoss accepts, found by
// walking the fit.Loss values until String falls back to "Loss(n)", so a loss added to
// fit without config (or the reverse) fails here.
func TestFitLossNames(t *testing.T) {
	var names []string
	for l := fit.Loss(1); l.String() != fmt.Sprintf("Loss(%d)", int(l)); l++ {
		names = append(names, l.String())
	}
	if !slices.Contains(names, "byol") {
		t.Fatalf("fit losses %v do not include byol", names)
	}
	for _, name := range names {
		c := Default()
		c.Fit.Loss = name
		if err := c.Validate(); err != nil {
			t.Errorf("fit.loss %q: %v, want valid", name, err)
		}
		if _, err := fit.ParseLoss(name); err != nil {
			t.Errorf("fit.ParseLoss(%q): %v", name, err)
		}
	}
	c := Default()
	c.Fit.Loss = "mse"
	err := c.Validate()
	for _, name := range names {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("the fit.loss error %v does not list %q", err, name)
		}
	}
}

func TestValidateTable(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		path   string // "" = valid
	}{
		{"budget deff ok", func(c *Config) { c.Pool.Budget = "deff:0.001" }, ""},
		{"budget bad", func(c *Config) { c.Pool.Budget = "deff:-1" }, "pool.budget"},
		{"budget word", func(c *Config) { c.Pool.Budget = "lots" }, "pool.budget"},
		{"external brokers", func(c *Config) { c.Kafka.Brokers = []string{"k1:9092", "k2:9092"} }, ""},
		{"role unknown", func(c *Config) { c.Role = "leader" }, "role"},
		{"replica on the embedded broker", func(c *Config) { c.Role = "replica" }, "role"},
		{"standby with brokers", func(c *Config) { c.Role, c.Kafka.Brokers = "standby", []string{"k:9092"} }, ""},
		{"same groups", func(c *Config) { c.Kafka.LeaderGroup = c.Kafka.Group }, "kafka.group"},
		{"session timeout", func(c *Config) { c.Kafka.SessionTimeout = 10 * time.Millisecond }, "kafka.session_timeout"},
		{"ui answers", func(c *Config) { c.UI.Answers = 0 }, "ui.answers"},
		{"ui samples", func(c *Config) { c.UI.Samples = -1 }, "ui.samples"},
		{"ui sample interval", func(c *Config) { c.UI.SampleInterval = time.Millisecond }, "ui.sample_interval"},
		{"models topic is the train topic", func(c *Config) { c.Kafka.Topics.Models = c.Kafka.Topics.Train }, "kafka.topics.models"},
		{"lineage topic is the audits topic", func(c *Config) { c.Kafka.Topics.Lineage = c.Kafka.Topics.Audits }, "kafka.topics.lineage"},
		{"cloudevents source", func(c *Config) { c.CloudEvents.Source = "https://cairn.example.org/prod" }, ""},
		{"cloudevents source control", func(c *Config) { c.CloudEvents.Source = "urn:cairn:\x01" }, "cloudevents.source"},
		{"cloudevents source not a URI", func(c *Config) { c.CloudEvents.Source = "%zz" }, "cloudevents.source"},
		{"lineage job empty", func(c *Config) { c.Lineage.Job = "" }, "lineage.job"},
		{"lineage namespace control", func(c *Config) { c.Lineage.Namespace = "a\nb" }, "lineage.namespace"},
		{"broker without port", func(c *Config) { c.Kafka.Brokers = []string{"k1"} }, "kafka.brokers[0]"},
		{"sasl unknown", func(c *Config) { c.Kafka.SASL.Mechanism = "gssapi" }, "kafka.sasl.mechanism"},
		{"sasl without user", func(c *Config) { c.Kafka.SASL.Mechanism = "plain" }, "kafka.sasl.username"},
		{"topic chars", func(c *Config) { c.Kafka.Topics.DLQ = "dead letters" }, "kafka.topics.dlq"},
		{"s zero is no sketch", func(c *Config) { c.Sketch.S = 0 }, ""},
		{"s negative", func(c *Config) { c.Sketch.S = -4 }, "sketch.s"},
		{"k above max", func(c *Config) { c.Query.K = 1000 }, "query.k"},
		{"init", func(c *Config) { c.Fit.Init = "xavier" }, "fit.init"},
		{"loss bt", func(c *Config) { c.Fit.Loss = "bt" }, ""},
		{"loss vicreg", func(c *Config) { c.Fit.Loss = "vicreg" }, ""},
		{"loss byol", func(c *Config) { c.Fit.Loss = "byol" }, ""},
		{"loss upper case", func(c *Config) { c.Fit.Loss = "BYOL" }, "fit.loss"},
		{"lr nan", func(c *Config) { c.Fit.LearningRate = nan() }, "fit.learning_rate"},
		{"untrained", func(c *Config) { c.Model.Untrained = true }, ""},
		{"shipped weights by name", func(c *Config) { c.Model.Weights = "shipped:fashion-mnist" }, ""},
		{"untrained with weights", func(c *Config) { c.Model.Untrained, c.Model.Weights = true, "w.safetensors" }, "model.untrained"},
		// One bad value per remaining check, so every section validator is exercised.
		{"data dir", func(c *Config) { c.DataDir = "" }, "data_dir"},
		{"shutdown", func(c *Config) { c.ShutdownTimeout = 0 }, "shutdown_timeout"},
		{"log level", func(c *Config) { c.LogLevel = "loud" }, "log_level"},
		{"embedded broker", func(c *Config) { c.Kafka.EmbeddedBroker = "here" }, "kafka.embedded_broker"},
		{"partitions", func(c *Config) { c.Kafka.Partitions = 0 }, "kafka.partitions"},
		{"tls half", func(c *Config) { c.Kafka.TLS.CertFile = "c.pem" }, "kafka.tls"},
		{"arch", func(c *Config) { c.Model.Arch = "" }, "model.arch"},
		{"pool m", func(c *Config) { c.Pool.M = 0 }, "pool.m"},
		{"stale fraction", func(c *Config) { c.Pool.SyncStaleFraction = 0 }, "pool.sync_stale_fraction"},
		{"tolerance 1", func(c *Config) { c.Pool.Tolerance = 1 }, "pool.tolerance"},
		{"tolerance negative", func(c *Config) { c.Pool.Tolerance = -0.1 }, "pool.tolerance"},
		{"tolerance NaN", func(c *Config) { c.Pool.Tolerance = math.NaN() }, "pool.tolerance"},
		{"fit k", func(c *Config) { c.Fit.K = 0 }, "fit.k"},
		{"fit epochs", func(c *Config) { c.Fit.Epochs = 0 }, "fit.epochs"},
		{"fit patience", func(c *Config) { c.Fit.Patience = 0 }, "fit.patience"},
		{"fit batch", func(c *Config) { c.Fit.Batch = 0 }, "fit.batch"},
		{"fit fits", func(c *Config) { c.Fit.Fits = 0 }, "fit.fits"},
		{"weight decay", func(c *Config) { c.Fit.WeightDecay = -1 }, "fit.weight_decay"},
		{"val fraction", func(c *Config) { c.Fit.ValFraction = 0.5 }, "fit.val_fraction"},
		{"points changed", func(c *Config) { c.Refit.PointsChanged = -1 }, "refit.points_changed"},
		{"pool change", func(c *Config) { c.Refit.PoolChangeFraction = 2 }, "refit.pool_change_fraction"},
		{"residual increase", func(c *Config) { c.Refit.ResidualIncrease = -1 }, "refit.residual_increase"},
		{"idle", func(c *Config) { c.Refit.Idle = -1 }, "refit.idle"},
		{"min points", func(c *Config) { c.Refit.MinPoints = 7 }, "refit.min_points"},
		{"backlog wait", func(c *Config) { c.Refit.BacklogWait = -1 }, "refit.backlog_wait"},
		{"debounce", func(c *Config) { c.Refit.DeleteDebounce = -1 }, "refit.delete_debounce"},
		{"query k zero", func(c *Config) { c.Query.K = 0 }, "query.k"},
		{"draw queries", func(c *Config) { c.Query.DrawQueries = 0 }, "query.draw_queries"},
		{"exact memory", func(c *Config) { c.Query.ExactMemoryBytes = -1 }, "query.exact_memory_bytes"},
		{"gradient memory", func(c *Config) { c.Query.GradientMemoryBytes = -1 }, "query.gradient_memory_bytes"},
		{"exact disk", func(c *Config) { c.Query.ExactDiskBytes = -1 }, "query.exact_disk_bytes"},
		{"exact cap", func(c *Config) { c.Query.ExactRowsCap = -1 }, "query.exact_rows_cap"},
		{"audit", func(c *Config) { c.Audit.Reference = 1 }, "audit"},
		{"max message", func(c *Config) { c.Limits.MaxMessageBytes = 0 }, "limits.max_message_bytes"},
		{"max id", func(c *Config) { c.Limits.MaxIDBytes = 0 }, "limits.max_id_bytes"},
		{"max k", func(c *Config) { c.Limits.MaxK = 0 }, "limits.max_k"},
		{"batch events", func(c *Config) { c.Limits.BatchEvents = 0 }, "limits.batch_events"},
		{"max outbox", func(c *Config) { c.Limits.MaxOutbox = 0 }, "limits.max_outbox"},
	}
	for _, tc := range cases {
		c := Default()
		tc.mutate(&c)
		err := c.Validate()
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: got %v, want valid", tc.name, err)
		case tc.path != "" && (err == nil || !strings.Contains(err.Error(), tc.path+" =")):
			t.Errorf("%s: got %v, want an error naming %s", tc.name, err, tc.path)
		}
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestLayers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.yaml")
	yaml := "data_dir: /var/lib/cairn\nsketch:\n  h: 8\n  s: 2048\nrefit:\n  delete_debounce: 2s\nkafka:\n  brokers: [a:1, b:2]\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("cairnd", flag.ContinueOnError)
	f := RegisterFlags(fs)
	if err := fs.Parse([]string{"--config", path, "--http", "127.0.0.1:9999", "--role", "standby"}); err != nil {
		t.Fatal(err)
	}
	c, err := f.Load(fs, []string{"CAIRN_SKETCH_H=16", "HOME=/root", "CAIRN_QUERY_DELTA=0.01",
		"CAIRN_QUERY_EXACT_MEMORY_BYTES=1024", "CAIRN_KAFKA_SESSION_TIMEOUT=3s", "CAIRN_QUERY_ON_PRIMARY=false"})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"data_dir from file", c.DataDir, "/var/lib/cairn"},
		{"sketch.s from file", c.Sketch.S, 2048},
		{"sketch.h env over file", c.Sketch.H, 16},
		{"query.delta from env", c.Query.Delta, 0.01},
		{"http from flag", c.HTTP, "127.0.0.1:9999"},
		{"role from flag", c.Role, "standby"},
		{"int64 from env", c.Query.ExactMemoryBytes, int64(1024)},
		{"duration from env", c.Kafka.SessionTimeout, 3 * time.Second},
		{"bool from env", c.Query.OnPrimary, false},
		{"debounce from file", c.Refit.DeleteDebounce, 2 * time.Second},
		{"brokers from file", strings.Join(c.Kafka.Brokers, ","), "a:1,b:2"},
		{"embedded default kept (flag not set)", c.Kafka.EmbeddedBroker, "127.0.0.1:9092"},
		{"untouched default", c.Fit.K, 256},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if err := c.Validate(); err != nil {
		t.Errorf("layered config invalid: %v", err)
	}
}

func TestLoadRejects(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		path    string
		environ []string
		want    string
	}{
		{"unknown yaml key", write("a.yaml", "sketch:\n  heads: 4\n"), nil, "heads"},
		{"wrong yaml type", write("b.yaml", "sketch:\n  h: four\n"), nil, "four"},
		{"missing file", filepath.Join(dir, "nope.yaml"), nil, "nope.yaml"},
		{"unknown env", "", []string{"CAIRN_SKETCH_HEADS=4"}, "CAIRN_SKETCH_HEADS"},
		{"misspelt env", "", []string{"CAIRN_SKETCH_HH=4"}, "did you mean CAIRN_SKETCH_H?"},
		{"misspelt loader env", "", []string{"CAIRN_MNIST_DIRS=/tmp"}, "did you mean CAIRN_MNIST_DIR?"},
		{"bad env int", "", []string{"CAIRN_POOL_M=many"}, "CAIRN_POOL_M"},
		{"bad env duration", "", []string{"CAIRN_SHUTDOWN_TIMEOUT=10"}, "CAIRN_SHUTDOWN_TIMEOUT"},
	}
	for _, tc := range cases {
		_, err := Load(tc.path, tc.environ)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
	if c, err := Load(write("empty.yaml", ""), nil); err != nil || c.Sketch.H != Default().Sketch.H {
		t.Errorf("empty file: got %v, %+v; want defaults", err, c.Sketch)
	}
}

// TestEnvNamespace: the loaders' variables (dataset.EnvVars) share the CAIRN_ namespace
// and never stop the daemon's configuration from loading, while settings set beside them
// still apply and an unknown one beside them is still reported.
func TestEnvNamespace(t *testing.T) {
	environ := []string{"CAIRN_SKETCH_H=16", "OTHER=1"}
	for _, k := range dataset.EnvVars() {
		environ = append(environ, k+"=/nonexistent")
	}
	c, err := Load("", environ)
	if err != nil {
		t.Fatalf("loader variables %v: %v", dataset.EnvVars(), err)
	}
	if c.Sketch.H != 16 {
		t.Errorf("CAIRN_SKETCH_H beside them: h = %d, want 16", c.Sketch.H)
	}
	if _, err := Load("", append(environ, "CAIRN_POOL_MM=3")); err == nil || !strings.Contains(err.Error(), "CAIRN_POOL_MM") {
		t.Errorf("unknown variable beside them: %v, want an error naming CAIRN_POOL_MM", err)
	}
	if len(dataset.EnvVars()) < 2 {
		t.Errorf("dataset.EnvVars() = %v, want the MNIST and Fashion-MNIST directories", dataset.EnvVars())
	}
}

// FuzzDecodeYAML checks that no configuration file makes loading or validation panic.
func FuzzDecodeYAML(f *testing.F) {
	f.Add([]byte("sketch:\n  h: 8\n"))
	f.Add([]byte("kafka: {brokers: [a:1]}\n"))
	f.Add([]byte("pool:\n  budget: deff:0.1\n  m: -3\n"))
	f.Add([]byte("{{{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := Default()
		if err := decodeYAML(&c, b); err != nil {
			return
		}
		_ = c.Validate()
	})
}

// TestUntrainedLayers: model.untrained is off by default (the shipped trained weights) and
// set by the YAML file, CAIRN_MODEL_UNTRAINED or --untrained.
func TestUntrainedLayers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.yaml")
	if err := os.WriteFile(path, []byte("model:\n  untrained: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		environ []string
		want    bool
	}{
		{"default", nil, nil, false},
		{"file", []string{"--config", path}, nil, true},
		{"env", nil, []string{"CAIRN_MODEL_UNTRAINED=true"}, true},
		{"flag", []string{"--untrained"}, nil, true},
		{"flag over env", []string{"--untrained=false"}, []string{"CAIRN_MODEL_UNTRAINED=true"}, false},
	} {
		fs := flag.NewFlagSet("cairnd", flag.ContinueOnError)
		f := RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c, err := f.Load(fs, tc.environ)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.Model.Untrained != tc.want || c.Model.Weights != "" {
			t.Errorf("%s: untrained %v weights %q, want %v and no weights", tc.name, c.Model.Untrained, c.Model.Weights, tc.want)
		}
	}
}

// TestPoolNormalize: pool.normalize defaults to true and is set by the YAML key under
// pool and by CAIRN_POOL_NORMALIZE, which wins over the file.
func TestPoolNormalize(t *testing.T) {
	if !Default().Pool.Normalize {
		t.Fatal("Default().Pool.Normalize = false, want true")
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("pool:\n  normalize: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path    string
		environ []string
		want    bool
	}{
		{"", nil, true},
		{path, nil, false},
		{"", []string{"CAIRN_POOL_NORMALIZE=false"}, false},
		{path, []string{"CAIRN_POOL_NORMALIZE=true"}, true},
	} {
		c, err := Load(tc.path, tc.environ)
		if err != nil || c.Pool.Normalize != tc.want {
			t.Errorf("Load(%q, %v): normalize %v, %v; want %v", tc.path, tc.environ, c.Pool.Normalize, err, tc.want)
		}
	}
}

// TestPoolTolerance: pool.tolerance defaults to 0.95 and is set by the YAML key under
// pool and by CAIRN_POOL_TOLERANCE, which wins over the file; 0 (the exact argmax) is
// valid.
func TestPoolTolerance(t *testing.T) {
	if got := Default().Pool.Tolerance; got != 0.95 {
		t.Fatalf("Default().Pool.Tolerance = %v, want 0.95", got)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("pool:\n  tolerance: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path    string
		environ []string
		want    float64
	}{
		{"", nil, 0.95},
		{path, nil, 0},
		{"", []string{"CAIRN_POOL_TOLERANCE=0.25"}, 0.25},
		{path, []string{"CAIRN_POOL_TOLERANCE=0.5"}, 0.5},
	} {
		c, err := Load(tc.path, tc.environ)
		if err != nil || c.Pool.Tolerance != tc.want {
			t.Errorf("Load(%q, %v): tolerance %v, %v; want %v", tc.path, tc.environ, c.Pool.Tolerance, err, tc.want)
		}
	}
}
