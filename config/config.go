package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/stream"
)

// Config is everything cairnd needs. The zero value is not useful: start from Default().
// Field names in YAML are the `yaml` tags; the environment variable of a field is CAIRN_
// followed by its YAML path in upper case with "." replaced by "_", e.g. CAIRN_SKETCH_H.
type Config struct {
	// DataDir holds the bbolt state file and the embedded broker's data. Default ./cairn-data.
	DataDir string `yaml:"data_dir"`
	// HTTP is the listen address for /healthz, /readyz, /metrics, /status, /model,
	// /audit/key, /ui and /schemas/. Off loopback it needs http_tls and http_auth
	// (docs/operations.md "Security"): Validate refuses an address that is not 127.0.0.0/8, ::1 or localhost
	// (an empty host, "0.0.0.0" and any other name count as beyond loopback) unless
	// both are set.
	HTTP string `yaml:"http"`
	// HTTPTLS and HTTPAuth guard the HTTP surface (YAML sections http_tls, http_auth).
	HTTPTLS  HTTPTLS  `yaml:"http_tls"`
	HTTPAuth HTTPAuth `yaml:"http_auth"`
	// ShutdownTimeout bounds graceful shutdown after SIGINT/SIGTERM.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// LogLevel is the least severe log level written: debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// CheckOnStart checks the whole state file at start (storage.Options.Check: bbolt's
	// page check and every record), before anything is written to it, and refuses a
	// damaged file. It reads the file once more than the restore does. Default true.
	CheckOnStart bool `yaml:"check_on_start"`
	// Role is what this daemon does in a deployment of several (docs/architecture.md
	// "Roles", the daemon package's doc "Roles"): "primary" (the default: ingestion, the pool,
	// refits, deletions, audits, and the model versions on the models topic), "replica"
	// (answers queries from the models topic, in one consumer group with the other
	// replicas; no ingestion), "standby" (consumes the training topic as the primary
	// does, publishes nothing, and leads when the primary is gone) or "featurizer"
	// (computes the training upserts' features in the featurizers' consumer group and
	// writes them to cairn.features; no store). A replica, standby or featurizer needs
	// kafka.brokers: the embedded broker belongs to one primary.
	Role string `yaml:"role"`

	Kafka  Kafka    `yaml:"kafka"`
	Model  Backbone `yaml:"model"`
	Sketch Sketch   `yaml:"sketch"`
	Pool   Pool     `yaml:"pool"`
	Fit    Fit      `yaml:"fit"`
	Refit  Refit    `yaml:"refit"`
	Query  Query    `yaml:"query"`
	Audit  Audit    `yaml:"audit"`
	Limits Limits   `yaml:"limits"`
	Ingest Ingest   `yaml:"ingest"`
	UI     UI       `yaml:"ui"`
	// CloudEvents and Lineage describe the daemon's output records to other systems
	// (YAML sections cloudevents, lineage; docs/events.md, "CloudEvents headers" and
	// "cairn.lineage").
	CloudEvents CloudEvents `yaml:"cloudevents"`
	Lineage     Lineage     `yaml:"lineage"`
}

// CloudEvents configures the CloudEvents headers (binary content mode) on every record
// cairnd writes to its output topics (package stream, Events).
type CloudEvents struct {
	// Source is every record's ce_source, the deployment that wrote it: a URI-reference
	// such as "https://cairn.example.org/prod" or "urn:cairn:prod". Empty (the default)
	// means "urn:cairn:" followed by kafka.topics.train (EventSource): a function of the
	// configuration only, never of the host, so that a standby, a restarted daemon and a
	// replay of the same inputs write the same headers. Set it when deployments on
	// different clusters share topic names and their events meet downstream.
	Source string `yaml:"source"`
}

// Lineage configures the OpenLineage RunEvents on kafka.topics.lineage (package
// internal/lineage): a START and then a COMPLETE or FAIL for every refit and every
// erasure.
type Lineage struct {
	// Namespace is the events' job namespace. Default "cairn".
	Namespace string `yaml:"namespace"`
	// Job is the prefix of the job names: refits run as job JOB.refit, erasures as
	// JOB.erasure. Default "cairnd".
	Job string `yaml:"job"`
}

// EventSource is the ce_source of the daemon's records: cloudevents.source, or
// "urn:cairn:" + kafka.topics.train when it is empty.
func (c *Config) EventSource() string {
	if c.CloudEvents.Source != "" {
		return c.CloudEvents.Source
	}
	return "urn:cairn:" + c.Kafka.Topics.Train
}

// HTTPTLS is the HTTP server's certificate (YAML section http_tls; environment
// CAIRN_HTTP_TLS_CERT_FILE, CAIRN_HTTP_TLS_KEY_FILE; flags --http-cert-file,
// --http-key-file). Both set: the server speaks HTTPS only (TLS 1.2 or later). Both
// empty (the default): plain HTTP, which Validate allows on loopback only.
type HTTPTLS struct {
	// CertFile is the PEM certificate chain the server presents, KeyFile its PEM
	// private key; both or neither. They are read once, at start.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of CertFile (both or neither).
	KeyFile string `yaml:"key_file"`
}

// HTTPAuth says who may use the HTTP surface (YAML section http_auth; package
// internal/admin enforces it). With neither TokenFile nor ClientCAFile every path is
// open, which Validate allows on loopback only; with either, every path but OpenPaths
// (and the UI's login page) needs a bearer token, a verified client certificate or,
// under /ui, a login session. With both, either one suffices: browsers log in with the
// token, machines may present a certificate instead.
type HTTPAuth struct {
	// TokenFile holds the bearer token (environment CAIRN_HTTP_AUTH_TOKEN_FILE, flag
	// --http-token-file): at least 16 printable ASCII characters without spaces,
	// surrounding whitespace ignored. The file must be a regular file that only its
	// owner may read (mode 0600 or stricter), else cairnd refuses to start. Requests
	// send "Authorization: Bearer TOKEN" (cairnctl --token-file); a browser posts it to
	// /ui/login once for a session cookie.
	TokenFile string `yaml:"token_file"`
	// ClientCAFile is a PEM bundle of the CAs whose client certificates authenticate
	// (mutual TLS; environment CAIRN_HTTP_AUTH_CLIENT_CA_FILE, flag
	// --http-client-ca-file). It needs http_tls. A client certificate is asked for, not
	// required, in the handshake, so that OpenPaths stay open to probes without one; one
	// that is presented must verify (an expired one, or one of another CA, fails the
	// handshake).
	ClientCAFile string `yaml:"client_ca_file"`
	// OpenPaths are served without authentication: any of /healthz, /readyz, /metrics
	// and /schemas/ (the events' JSON Schemas, public documents; the path and
	// everything below it); the others serve training inputs or the daemon's state.
	// Default all four; empty closes them too (CAIRN_HTTP_AUTH_OPEN_PATHS= with nothing
	// after the "=", or open_paths: []).
	OpenPaths []string `yaml:"open_paths"`
	// SessionTTL is how long a UI login lasts (the cookie's Max-Age and the server-side
	// session's expiry), in [1m, 168h]. Default 12h. Sessions live in the daemon's
	// memory: a restart logs every browser out.
	SessionTTL time.Duration `yaml:"session_ttl"`
}

// OpenablePaths are the paths http_auth.open_paths may name.
var OpenablePaths = []string{"/healthz", "/readyz", "/metrics", "/schemas/"}

// UI configures the read-only explanation and monitoring pages served under /ui on the
// HTTP address (package internal/ui; they bind where the HTTP server binds).
type UI struct {
	// Enabled serves /ui. Default true.
	Enabled bool `yaml:"enabled"`
	// Answers is how many recent answers the daemon keeps in memory for /ui/answer/REQ.
	// Default 1000.
	Answers int `yaml:"answers"`
	// SampleInterval is the period of the overview's time series. Default 5s.
	SampleInterval time.Duration `yaml:"sample_interval"`
	// Samples is how many samples each series keeps (a ring). Default 720: an hour at 5 s.
	Samples int `yaml:"samples"`
}

// Kafka selects the broker and names the topics (docs/events.md).
type Kafka struct {
	// EmbeddedBroker is the loopback address of the in-process broker, used when Brokers
	// is empty. Default 127.0.0.1:9092.
	EmbeddedBroker string `yaml:"embedded_broker"`
	// Brokers are the bootstrap servers of an external Kafka; non-empty disables the
	// embedded broker.
	Brokers []string `yaml:"brokers"`
	// Partitions is the partition count of topics the daemon creates.
	Partitions int `yaml:"partitions"`
	// DLQKeepRaw copies the first 4 KiB of each rejected message into its dead letter.
	// Default false: a dead letter keeps the reason, coordinates, key, length and
	// SHA-256, and no input data, which deletions could not reach.
	DLQKeepRaw bool   `yaml:"dlq_keep_raw"`
	TLS        TLS    `yaml:"tls"`
	SASL       SASL   `yaml:"sasl"`
	Topics     Topics `yaml:"topics"`
	// AllowPlaintextSASL lets a SASL mechanism run without kafka.tls.enabled (environment
	// CAIRN_KAFKA_ALLOW_PLAINTEXT_SASL), for a network trusted not to be read: the
	// credentials (PLAIN's password itself, SCRAM's exchange open to offline guessing)
	// and every record then cross it unencrypted. Default false: Validate refuses SASL
	// without TLS, and cairnd logs a warning at every start when this allows it.
	AllowPlaintextSASL bool `yaml:"allow_plaintext_sasl"`
	// TopicPolicy is what cairnd does at start when the cluster's settings of the
	// training, models, audits or erasures topic cannot keep erasure or the audit chain
	// (the rules are stream.CheckTopics's; environment CAIRN_KAFKA_TOPIC_POLICY):
	// "enforce" (the default) refuses to start and names each setting; "warn" starts,
	// logs each one and answers /readyz 503 with them until a restart finds them fixed.
	TopicPolicy string `yaml:"topic_policy"`
	// TopicCheckInterval is how often a running cairnd reads the partition counts of
	// those topics; when one changes it checks their settings again, and a training
	// topic whose count changed (stream.PartitionsChanged) or a setting that now breaks a
	// guarantee makes /readyz answer 503 with the reason and logs an error under either
	// policy (a running daemon cannot refuse to start; under "enforce" the next start
	// refuses a bad setting, while the count it starts with becomes the new reference).
	// Default 30s; at least 100ms.
	TopicCheckInterval time.Duration `yaml:"topic_check_interval"`
	// Group is the consumer group the replicas share on the query topic (Kafka spreads
	// its partitions between them). Default "cairn.replicas".
	Group string `yaml:"group"`
	// LeaderGroup is the consumer group on the leader topic whose one partition decides
	// which of the primary and its standbys leads. Default "cairn.leader".
	LeaderGroup string `yaml:"leader_group"`
	// SessionTimeout is how long the broker waits for a silent group member (a replica
	// or the leader) before moving its partitions to the others. Default 10s.
	SessionTimeout time.Duration `yaml:"session_timeout"`
}

// TLS configures the connection to an external broker (every connection: readers,
// writers, the admin client and the consumer groups).
type TLS struct {
	// Enabled speaks TLS to the brokers. Default false.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs that sign the brokers' certificates; empty
	// means the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile is a PEM client certificate for brokers that authenticate clients by
	// mutual TLS; with KeyFile, both or neither.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `yaml:"key_file"`
	// InsecureSkipVerify accepts any broker certificate: for tests only, since anyone
	// on the path can then read and alter every record.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// SASL configures authentication to an external broker.
type SASL struct {
	// Mechanism is "" (none, the default), "plain", "scram-sha-256" or
	// "scram-sha-512"; any of them needs kafka.tls.enabled unless
	// kafka.allow_plaintext_sasl is set.
	Mechanism string `yaml:"mechanism"`
	// Username is the SASL user; required with a mechanism.
	Username string `yaml:"username"`
	// Password is the SASL user's password. Prefer CAIRN_KAFKA_SASL_PASSWORD in the
	// environment to writing it into a file.
	Password string `yaml:"password"`
}

// Topics are the topic names (docs/events.md); all must differ.
type Topics struct {
	// Train carries the training events, upserts and deletes keyed by point id (in;
	// compacted).
	Train string `yaml:"train"`
	// Queries carries the queries, keyed by request id (in).
	Queries string `yaml:"queries"`
	// Attributions carries the answers, keyed by request id (out).
	Attributions string `yaml:"attributions"`
	// Audits carries the signed, hash-chained deletion audits, keyed by request id (out;
	// kept forever).
	Audits string `yaml:"audits"`
	// DLQ carries the dead letters of rejected inputs, keyed by their source
	// coordinates (out).
	DLQ string `yaml:"dlq"`
	// Status carries the daemon's status events (models, drift, certificates, the audit
	// key and checkpoints), keyed by kind (out).
	Status string `yaml:"status"`
	// Models is the compacted topic of model versions and deletion masks the primary
	// writes and replicas read.
	Models string `yaml:"models"`
	// Leader is the one-partition topic whose consumer group elects the leader.
	Leader string `yaml:"leader"`
	// Lineage carries the OpenLineage RunEvents of refits and erasures, keyed by run id
	// (out; kept forever, not compacted).
	Lineage string `yaml:"lineage"`
}

// Backbone configures the frozen backbone (YAML section "model").
type Backbone struct {
	// Arch is the architecture spec (entk), e.g. convnet:1x28x28-16-32-10.
	Arch string `yaml:"arch"`
	// Weights is a safetensors file with the backbone's state_dict, or "shipped:NAME" for
	// one of the trained files in the binary (entk/weights: mnist, fashion-mnist, adult);
	// empty means the shipped file for Arch (MNIST's for the default convnet), and it is
	// an error when none is shipped for Arch.
	Weights string `yaml:"weights"`
	// Untrained asks for the seeded PyTorch-default initialization instead of trained
	// weights: a test fixture (on it all points look alike to the eNTK). Not with Weights.
	Untrained bool `yaml:"untrained"`
	// Seed is the root of every named random stream but the views': the sketch's heads
	// and signs, the fit's draws (initializer, minibatch order), the top-up order and the
	// evaluation draws.
	Seed uint64 `yaml:"seed"`
	// ViewSeed is the root of the augmentations that make a point's two views
	// (docs/architecture.md "Views"). It is separate from Seed because the views are part of the data
	// the pool is selected from, not of the model's random draws: two deployments that
	// differ only in Seed augment every point alike, so their pools differ only by what
	// the sketch changes (the views were measured as the largest share of the
	// reseed instability: top-10 Jaccard 0.17 with the views reseeded and the sketch
	// fixed, 0.48 the other way round). Default 1, which equals the default Seed, so the
	// default deployment's views and features are unchanged.
	ViewSeed uint64 `yaml:"view_seed"`
	// File is a network exported to ONNX (FILE.onnx, external data beside it) to use as
	// the backbone instead of a built-in architecture: any graph of the operators package
	// entk/onnx supports, with one input whose per-example shape the file fixes. Events'
	// x is that input tensor flattened row-major. With File set, Arch is ignored unless it
	// is "onnx:<hex SHA-256>", which pins the file's digest (a different file is refused),
	// and may be empty; Weights and Untrained must be unset. Export in eval mode with BatchNorm preserved
	// and constant folding off (the recipe entk/onnx's ExportRecipe holds); `cairnctl
	// model inspect FILE.onnx` shows what cairn sees in a file.
	File string `yaml:"file"`
	// Params selects the kernel's parameters among the ONNX model's by initializer-name
	// globs (path.Match syntax: "layer3.*", "fc.*"); the others stay constants and the
	// eNTK is over the selected ones only (every answer states the coverage). Empty: every
	// parameter. A glob that matches no parameter is an error. Only with File.
	Params []string `yaml:"params"`
	// AllowFoldedBatchNorm accepts an ONNX file whose BatchNorm layers the exporter
	// folded into the convolutions (Conv weights named onnx::Conv_N and no
	// BatchNormalization node). By default such a file is refused: its kernel would
	// differentiate the folded weights, not the network's parameters, while the answers'
	// coverage would claim every parameter. Re-export with the recipe above instead when
	// you can; with this set the daemon starts and logs the warning. The other load
	// warnings (Identity-shared initializers, parameters no output depends on) are logged
	// and never refused.
	AllowFoldedBatchNorm bool `yaml:"allow_folded_batchnorm"`
}

// Sketch is the fit-draw budget of the sketched eNTK: h heads, SRHT width s (0 = none).
type Sketch struct {
	// H is the number of Gaussian heads h of the sketched eNTK features ψ (at least 1).
	H int `yaml:"h"`
	// S is the SRHT width s of each head's parameter-space sketch; 0 keeps the full
	// parameter dimension (no sketch). The features have h·s values per view.
	S int `yaml:"s"`
}

// Pool is the landmark budget: M = m per view, or Budget "deff:λ".
type Pool struct {
	// M is the number of landmarks per view (the pool holds M = 2m), selected by greedy
	// pivoted Cholesky on the sketched features; ignored when Budget is set.
	M int `yaml:"m"`
	// Budget "deff:λ" sizes each view's landmark set by its effective dimension d_eff at
	// ridge λ instead of a fixed m; empty (the default) uses m.
	Budget string `yaml:"budget"`
	// SyncStaleFraction triggers a Sync when this fraction of pivots is stale.
	SyncStaleFraction float64 `yaml:"sync_stale_fraction"`
	// Normalize pivots greedy pivoted Cholesky on the normalized residual δ_j/K_jj
	// instead of δ_j (coreset.Config.Normalize; environment CAIRN_POOL_NORMALIZE). Default
	// true: the raw rule starves points of small eNTK norm (on MNIST it selected no
	// digit 1); the residual certificate tr R stays that of the raw kernel,
	// somewhat larger. false is the paper's rule. A pool stored under the other rule is
	// kept until its next sync, which re-selects (internal/ingest).
	Normalize bool `yaml:"normalize"`
	// Tolerance τ ∈ [0, 1) is tolerant pivoting (coreset.Config.Tolerance; environment
	// CAIRN_POOL_TOLERANCE): each greedy step takes, among the candidates whose key is at
	// least (1−τ) times the step's largest, the one of smallest seed-free key of its id
	// (coreset.PivotKey), instead of the exact argmax, which late in a selection is
	// decided by the sketch's noise. 0 is the exact argmax (the paper's rule). Default
	// 0.95, with normalized pivoting: measured on n = 2,000 stored points, m = 256 per
	// view, h = 4, s = 1024, pools of model.seed 1, 2 and 3 compared pairwise by the
	// exact-eNTK top-10 of 100 test queries over them (Jaccard; τ = 0 in brackets):
	// MNIST 1.000 (0.21), Fashion-MNIST 1.000, UCI Adult 1.000 (0.57), every class at
	// ≥ 0.63 of its share of the points (MNIST 0.77, Fashion 0.63, Adult 0.81), and tr R/tr
	// K no worse than the exact argmax's (MNIST 0.121 against 0.124). Lower tolerances
	// leave seed pairs apart (normalized: τ = 0.6 Fashion 0.39, τ = 0.8 Fashion 0.73–0.92,
	// τ = 0.9 Adult 0.50–0.84). A pool stored under another rule is kept until its next sync,
	// which re-selects (internal/ingest).
	Tolerance float64 `yaml:"tolerance"`
}

// Fit configures stage 2 (paper Table hparams).
type Fit struct {
	// Loss is the self-supervised objective: bt, simclr, vicreg or byol (fit.ParseLoss).
	Loss string `yaml:"loss"`
	// Init is the initializer of the coefficients Ã₀: kaiming, pci (principal-component
	// initialization by a dense eigendecomposition), pci-lanczos (the same by Lanczos),
	// csi, aui or krepes-pci (fit.ParseInit).
	Init string `yaml:"init"`
	// K is the latent dimension k of the kernel encoder (the columns of Ã).
	K int `yaml:"k"`
	// Epochs is the most Adam epochs one fit runs.
	Epochs int `yaml:"epochs"`
	// Patience stops a fit after this many epochs without a strict gain of the
	// validation score; the best checkpoint is kept.
	Patience int `yaml:"patience"`
	// Batch is the Adam minibatch size (points).
	Batch int `yaml:"batch"`
	// LearningRate is Adam's peak learning rate (cosine schedule).
	LearningRate float64 `yaml:"learning_rate"`
	// WeightDecay is the L2 penalty on the coefficients, added to the gradient as
	// torch.optim.Adam does.
	WeightDecay float64 `yaml:"weight_decay"`
	// Fits is R, the number of repeated fits for the fit floor (1 disables it).
	Fits int `yaml:"fits"`
	// ValFraction is the share of stored points (chosen by a seeded hash of the id, so a
	// point's role never depends on arrival order) held out of the training rows to
	// select checkpoints: by k-NN accuracy when they carry labels, else by loss.
	ValFraction float64 `yaml:"val_fraction"`
	// Precision is the arithmetic of each Adam batch's matrix products: float32 (about
	// half the time of a fit step) or float64. Parameters, optimizer state and the loss are
	// float64 either way (fit.Options.Float32). BYOL always uses float64.
	Precision string `yaml:"precision"`
}

// Refit holds the drift triggers (docs/architecture.md "Refits"); any one firing starts
// a refit.
type Refit struct {
	// PointsChanged: points added or removed since the last fit (0 disables).
	PointsChanged int `yaml:"points_changed"`
	// PoolChangeFraction: fraction of landmarks replaced since the last fit (0 disables).
	PoolChangeFraction float64 `yaml:"pool_change_fraction"`
	// ResidualIncrease: relative increase of tr R / tr K since the last fit (0 disables).
	ResidualIncrease float64 `yaml:"residual_increase"`
	// OnDelete refits after a pending deletion; deletions close together share one refit.
	OnDelete bool `yaml:"on_delete"`
	// DeleteDebounce is how long to wait for more deletions before the shared refit.
	DeleteDebounce time.Duration `yaml:"delete_debounce"`
	// Idle refits when the stored points differ from the serving model's and no training
	// event has been applied for this long (0 disables). It makes the model served at
	// quiescence a function of the stored points alone, which exact unlearning and replay
	// need (docs/architecture.md "Exact unlearning").
	Idle time.Duration `yaml:"idle"`
	// MinPoints is the number of stored points the first fit waits for.
	MinPoints int `yaml:"min_points"`
	// BacklogWait is how long a points_changed, pool_changed or residual_increase refit
	// waits while the training topic is behind by a reader batch or more, so that a burst
	// is ingested on every core before the refit that covers it (0: never waits). The
	// first fit and deletion refits never wait.
	BacklogWait time.Duration `yaml:"backlog_wait"`
}

// Query configures certified answers.
type Query struct {
	// K is the default top-K size of an answer, for queries that name none.
	K int `yaml:"k"`
	// Delta is the default failure probability δ of a sketched answer's certificate, in
	// (0, 1); answers on exact kernel rows spend none of it.
	Delta float64 `yaml:"delta"`
	// DrawQueries is how many sketched answers one evaluation draw serves before it is
	// retired (its seed is then revealed on cairn.status; answers carry only its hash).
	// Each sketched answer splits its δ over the pool only (δ_ℓ = δ/M, Thm. topk).
	DrawQueries int `yaml:"draw_queries"`
	// ExactMemoryBytes is the memory budget of the exact variance model: when the
	// landmarks' exact eNTK rows (entk.ExactDim float32s per landmark) fit in it, every
	// answer ranks exact kernel rows with only the rounding bound as radius; otherwise
	// answers use the sketched evaluation draw. 0 turns the exact model off.
	ExactMemoryBytes int64 `yaml:"exact_memory_bytes"`
	// GradientMemoryBytes is the memory budget of the gradient rankings ("gradient_cosine",
	// "gradient"):
	// every labelled stored point's gradient row (P float32s a point, P the backbone's
	// parameters: 164 MB at 2,000 MNIST points on the built-in convnet, so the default
	// holds 6,550 of them; a dense backbone's factored rows are far smaller, 15 MB at
	// 2,000 Adult points on resmlp:108-128x3-8) is kept with each model version when they
	// fit in it (a replica builds the same rows from the primary's points on the models
	// topic, within its own budget). Otherwise the gradient rankings are not served and
	// a default of either answers with "entk". 0 turns them off.
	GradientMemoryBytes int64 `yaml:"gradient_memory_bytes"`
	// ExactDiskBytes is the disk budget of the exact variance model, per model version:
	// exact rows that exceed exact_memory_bytes but fit in it are written once per served
	// version to a file under data_dir/exactrows and read through a read-only memory
	// mapping, with answers bit for bit those of rows in memory ("exact_rows": "disk").
	// The file's name is removed as soon as it is mapped and checked, and its blocks are
	// freed when the version's last reader is gone; a restart rebuilds it. While a new
	// version replaces an old one both may be held. 0 keeps rows in memory only.
	ExactDiskBytes int64 `yaml:"exact_disk_bytes"`
	// ExactRowsCap is, on the sketched path, the most landmarks whose intervals cross the
	// cut that get an exact kernel row (one exact Jacobian each) before ranking again.
	ExactRowsCap int `yaml:"exact_rows_cap"`
	// OnPrimary makes the primary answer the query topic itself, with its offsets in its
	// own state (default true: one daemon does everything). A deployment with replicas
	// sets it false, so that only the replicas' consumer group answers and no query is
	// answered twice.
	OnPrimary bool `yaml:"on_primary"`
	// Score is the default ranking of an answer, when a query names none ("score"):
	// "gradient_cosine" (every labelled stored point by the cosine of J_tᵀu_t and J_iᵀg_i,
	// the direction of the point's gradient step against the query's: the ranking whose
	// top point, left out of training, moves the query most reliably, docs/validate),
	// "gradient" (the same points by ⟨J_tᵀu_t, J_iᵀg_i⟩, the change of the query's
	// predicted-class margin under a gradient step on the point: the highest LDS; on a
	// model without gradient rows a default of either gradient ranking answers with
	// "entk"),
	// "entk" (the exact eNTK similarity k*(x_t, x_ℓ), independent of the fit),
	// "displacement" (the paper's k·ω) or "representer" (k(x_t, x_ℓ)·⟨Ã_ℓ, ẑ(x_t)⟩, the
	// landmark's contribution to the query's latent). See certify's doc "Rankings".
	Score string `yaml:"score"`
	// StableJaccard is the stability target: an answer is stable when the expected
	// top-K Jaccard of its ranking under a refit with another seed is at least this, and
	// only a stable answer is certified (certify's doc "Verdicts"). Default 0.8.
	StableJaccard float64 `yaml:"stable_jaccard"`
	// ReseedQueries is how many stored points (landmarks of neither pool) each refit asks
	// of its pool and of the pool a deployment with another model.seed would select from
	// the same points, to measure the pool part of the answers' stability (the mean
	// top-K Jaccard; ingest.MeasureReseed). It costs a sync's selection per refit and
	// the featurization of the points that changed since the last refit: the reseeded
	// features of every point (2·h·s float32s, 32 KiB with the default sketch) are kept
	// between refits while they fit the point cache's 4 GiB. 0 turns it off, and then no
	// answer is stable. Default 64.
	ReseedQueries int `yaml:"reseed_queries"`
}

// Audit configures the deletion audit (paper appendix D).
type Audit struct {
	// Random is N, the number of random landmark deletions of the same size that the
	// deletion effect is ranked against (percentile and permutation p-value).
	Random int `yaml:"random"`
	// Reference and Test bound the stored points whose embeddings the 50-NN confidence
	// uses (reference set and test points, chosen by seeded id hash).
	Reference int `yaml:"reference"`
	// Test is the most stored points the deletion effect's 50-NN confidence is
	// measured on (see Reference).
	Test int `yaml:"test"`
}

// Limits bound what outside bytes may ask of the daemon.
type Limits struct {
	// MaxMessageBytes bounds an input message; a longer one is dead-lettered
	// (oversize).
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// MaxIDBytes bounds point ids and request ids, in bytes (bad_id beyond).
	MaxIDBytes int `yaml:"max_id_bytes"`
	// MaxK bounds the top-K size a query may ask for (bad_value beyond) and query.k.
	MaxK int `yaml:"max_k"`
	// BatchEvents is the number of input events applied per bbolt transaction.
	BatchEvents int `yaml:"batch_events"`
	// MaxOutbox bounds the outputs waiting in the outbox (a broker outage holds them
	// there): at or above it, ingestion and queries pause until the publisher drains it
	// below, and /readyz answers 503. Default 100,000.
	MaxOutbox int `yaml:"max_outbox"`
}

// Ingest configures where a primary's (or a standby's) training features come from.
type Ingest struct {
	// Featurizers makes the primary take each training upsert's features from the
	// records that `cairnd --role featurizer` processes write to cairn.features, checked
	// against its own pipeline fingerprint, event coordinates and id (docs/architecture.md,
	// "Roles"), and compute itself only those that are missing, invalid or late.
	// The state is byte-identical either way. Default false: the primary featurizes
	// everything.
	Featurizers bool `yaml:"featurizers"`
	// FeaturizerTimeout is how long a batch waits for the next of its records before
	// the primary computes the missing ones itself (a batch whose records keep coming
	// waits for all of them), and how long the featurizers may be silent before it
	// stops waiting at all. Set it above the time a featurizer takes for 16 events.
	// Default 2s.
	FeaturizerTimeout time.Duration `yaml:"featurizer_timeout"`
}

// Default returns the documented defaults: the embedded mode on MNIST-shaped data.
func Default() Config {
	return Config{
		DataDir:         "./cairn-data",
		HTTP:            "127.0.0.1:8080",
		HTTPAuth:        HTTPAuth{OpenPaths: slices.Clone(OpenablePaths), SessionTTL: 12 * time.Hour},
		ShutdownTimeout: 10 * time.Second,
		LogLevel:        "info",
		CheckOnStart:    true,
		Role:            "primary",
		Kafka: Kafka{
			Group:              "cairn.replicas",
			LeaderGroup:        "cairn.leader",
			SessionTimeout:     10 * time.Second,
			EmbeddedBroker:     "127.0.0.1:9092",
			Partitions:         4,
			TopicPolicy:        "enforce",
			TopicCheckInterval: 30 * time.Second,
			Topics: Topics{
				Train:        "cairn.train",
				Queries:      "cairn.queries",
				Attributions: "cairn.attributions",
				Audits:       "cairn.audits",
				DLQ:          "cairn.dlq",
				Status:       "cairn.status",
				Models:       "cairn.models",
				Leader:       "cairn.leader",
				Lineage:      "cairn.lineage",
			},
		},
		Model:  Backbone{Arch: "convnet:1x28x28-16-32-10", Seed: 1, ViewSeed: 1},
		Sketch: Sketch{H: 4, S: 1024},
		Pool:   Pool{M: 256, SyncStaleFraction: 0.05, Normalize: true, Tolerance: 0.95},
		Fit: Fit{
			Loss: "simclr", Init: "pci", K: 256, Epochs: 20, Patience: 7, Batch: 512,
			LearningRate: 1.25e-2, WeightDecay: 3e-5, Fits: 2, ValFraction: 0.1, Precision: "float32",
		},
		Refit: Refit{
			PointsChanged: 5000, PoolChangeFraction: 0.1, ResidualIncrease: 0.1,
			OnDelete: true, DeleteDebounce: 250 * time.Millisecond, Idle: time.Second, MinPoints: 64, BacklogWait: time.Minute,
		},
		Query: Query{K: 10, Delta: 0.05, DrawQueries: 10000, ExactMemoryBytes: 256 << 20, ExactDiskBytes: 8 << 30, ExactRowsCap: 32, OnPrimary: true,
			Score: "gradient_cosine", GradientMemoryBytes: 512 << 20, StableJaccard: 0.8, ReseedQueries: 64},
		Audit:   Audit{Random: 30, Reference: 1000, Test: 250},
		Limits:  Limits{MaxMessageBytes: 1 << 20, MaxIDBytes: 256, MaxK: 100, BatchEvents: 256, MaxOutbox: 100_000},
		Ingest:  Ingest{FeaturizerTimeout: 2 * time.Second},
		UI:      UI{Enabled: true, Answers: 1000, SampleInterval: 5 * time.Second, Samples: 720},
		Lineage: Lineage{Namespace: "cairn", Job: "cairnd"},
	}
}

// Load returns Default() overlaid by the YAML file at path (if path is non-empty) and then
// by CAIRN_* environment variables from environ (os.Environ() form). Flags are applied by
// the caller afterwards (see Flags). Load does not call Validate.
func Load(path string, environ []string) (Config, error) {
	c := Default()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
		if err := decodeYAML(&c, b); err != nil {
			return c, fmt.Errorf("config: %s: %w", path, err)
		}
	}
	if err := applyEnv(&c, environ); err != nil {
		return c, err
	}
	return c, nil
}

// decodeYAML overlays b on c, rejecting unknown keys and duplicate keys so a typo is an
// error instead of a silently ignored setting.
func decodeYAML(c *Config, b []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty file: defaults
		}
		return err
	}
	return nil
}

// applyEnv sets every field whose CAIRN_<PATH> variable is present in environ.
func applyEnv(c *Config, environ []string) error {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "CAIRN_") {
			env[k] = v
		}
	}
	if len(env) == 0 {
		return nil
	}
	known := map[string]bool{}
	var errs []error
	walk(reflect.ValueOf(c).Elem(), "", func(path string, f reflect.Value) {
		name := EnvName(path)
		known[name] = true
		v, ok := env[name]
		if !ok {
			return
		}
		if err := setField(f, v); err != nil {
			errs = append(errs, fmt.Errorf("config: %s=%q: %w", name, v, err))
		}
	})
	for _, k := range dataset.EnvVars() {
		known[k] = true // the loaders' own (config/doc.go "Environment")
	}
	unknown := make([]string, 0, len(env))
	for k := range env {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		if near := nearest(k, known); near != "" {
			errs = append(errs, fmt.Errorf("config: unknown environment variable %s (did you mean %s?)", k, near))
		} else {
			errs = append(errs, fmt.Errorf("config: unknown environment variable %s", k))
		}
	}
	return errors.Join(errs...)
}

// nearest is the name in known closest to k by edit distance, if within a third of k's
// length (a typo rather than another word), else "".
func nearest(k string, known map[string]bool) string {
	best, bestD := "", len(k)/3+1
	for name := range known {
		if d := editDistance(k, name); d < bestD || d == bestD && best != "" && name < best {
			best, bestD = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes), by the usual
// two-row dynamic program.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// walk calls fn for every leaf field of the struct v with its dotted YAML path.
func walk(v reflect.Value, prefix string, fn func(path string, f reflect.Value)) {
	walkFields(v, prefix, "", func(path, _ string, f reflect.Value) { fn(path, f) })
}

// setField parses s into f according to f's kind.
func setField(f reflect.Value, s string) error {
	switch {
	case f.Type() == reflect.TypeOf(time.Duration(0)):
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		f.SetString(s)
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case f.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return err
		}
		f.SetInt(int64(n))
	case f.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		f.SetInt(n)
	case f.Kind() == reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return err
		}
		f.SetUint(n)
	case f.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		f.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("unsupported field kind %s", f.Kind())
	}
	return nil
}

// Validate reports every problem at once, each naming the YAML path and the value.
func (c *Config) Validate() error {
	var p problems
	c.validateServer(&p)
	c.validateHTTP(&p)
	c.validateKafka(&p)
	c.validateModel(&p)
	c.validateFit(&p)
	c.validateRefit(&p)
	c.validateQuery(&p)
	c.validateLimits(&p)
	c.validateIngest(&p)
	c.validateUI(&p)
	c.validateEvents(&p)
	return errors.Join(p...)
}

// validateEvents checks the CloudEvents source and the lineage job names.
func (c *Config) validateEvents(p *problems) {
	if c.CloudEvents.Source != "" {
		if err := stream.ValidateSource(c.CloudEvents.Source); err != nil {
			p.bad("cloudevents.source", c.CloudEvents.Source, "must be a URI-reference without control characters")
		}
	} else if err := stream.ValidateSource(c.EventSource()); err != nil {
		p.bad("cloudevents.source", c.EventSource(), "the default from kafka.topics.train is no URI-reference: set one")
	}
	for _, f := range []struct{ path, v string }{{"lineage.namespace", c.Lineage.Namespace}, {"lineage.job", c.Lineage.Job}} {
		if f.v == "" || strings.TrimFunc(f.v, unicode.IsPrint) != "" || len(f.v) > 256 {
			p.bad(f.path, f.v, "must be 1-256 printable characters")
		}
	}
}

func (c *Config) validateUI(p *problems) {
	u := c.UI
	p.atLeast1(intField{"ui.answers", u.Answers}, intField{"ui.samples", u.Samples})
	if u.SampleInterval < 100*time.Millisecond || u.SampleInterval > time.Hour {
		p.bad("ui.sample_interval", u.SampleInterval, "must be in [100ms, 1h]")
	}
}

// problems collects the *FieldErrors of one Validate.
type problems []error

func (p *problems) bad(path string, v any, why string) {
	*p = append(*p, &FieldError{Path: path, Value: fmt.Sprint(v), Reason: why})
}

func (p *problems) addr(path, addr string) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		p.bad(path, addr, "must be host:port")
	}
}

// atLeast1 reports every field below 1.
func (p *problems) atLeast1(fields ...intField) {
	for _, f := range fields {
		if f.v < 1 {
			p.bad(f.path, f.v, "must be at least 1")
		}
	}
}

// intField is an integer setting and its YAML path.
type intField struct {
	path string
	v    int
}

// validateServer checks the top-level settings.
func (c *Config) validateServer(p *problems) {
	if c.DataDir == "" {
		p.bad("data_dir", c.DataDir, "must not be empty")
	}
	p.addr("http", c.HTTP)
	if c.ShutdownTimeout <= 0 {
		p.bad("shutdown_timeout", c.ShutdownTimeout, "must be positive")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		p.bad("log_level", c.LogLevel, "must be debug, info, warn or error")
	}
	switch c.Role {
	case "primary":
	case "replica", "standby", "featurizer":
		if len(c.Kafka.Brokers) == 0 {
			p.bad("role", c.Role, "needs kafka.brokers (--brokers): the embedded broker belongs to one primary")
		}
	default:
		p.bad("role", c.Role, `must be "primary", "replica", "standby" or "featurizer"`)
	}
}

// validateHTTP checks the guard of the HTTP surface: off loopback both TLS and
// authentication (docs/operations.md "Security"). It reads no file; internal/admin reads them at
// start (and checks the token file's mode there).
func (c *Config) validateHTTP(p *problems) {
	t, a := c.HTTPTLS, c.HTTPAuth
	if (t.CertFile == "") != (t.KeyFile == "") {
		p.bad("http_tls", t.CertFile+","+t.KeyFile, "cert_file and key_file go together")
	}
	if a.ClientCAFile != "" && t.CertFile == "" {
		p.bad("http_auth.client_ca_file", a.ClientCAFile, "client certificates need TLS: set http_tls.cert_file and http_tls.key_file")
	}
	for _, path := range a.OpenPaths {
		if !slices.Contains(OpenablePaths, path) {
			p.bad("http_auth.open_paths", path, "only /healthz, /readyz, /metrics and /schemas/ may stay open; the other paths serve training inputs and the daemon's state")
		}
	}
	if a.SessionTTL < time.Minute || a.SessionTTL > 7*24*time.Hour {
		p.bad("http_auth.session_ttl", a.SessionTTL, "must be in [1m, 168h]")
	}
	if _, _, err := net.SplitHostPort(c.HTTP); err != nil || LoopbackAddr(c.HTTP) {
		return
	}
	if a.TokenFile == "" && a.ClientCAFile == "" {
		p.bad("http", c.HTTP, "listens beyond loopback without authentication: set http_auth.token_file "+
			"(--http-token-file) or http_auth.client_ca_file (--http-client-ca-file)")
	}
	if t.CertFile == "" {
		p.bad("http", c.HTTP, "listens beyond loopback without TLS: set http_tls.cert_file and http_tls.key_file "+
			"(--http-cert-file, --http-key-file)")
	}
}

// LoopbackAddr says whether the host of addr (host:port) is loopback: localhost, or an
// IP address in 127.0.0.0/8 or ::1. An empty host (every interface) and any other name
// are not: a name may resolve anywhere.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validateKafka checks the brokers, partitions, TLS, SASL and the six topics (valid
// names, all different).
func (c *Config) validateKafka(p *problems) {
	k := c.Kafka
	if len(k.Brokers) == 0 {
		p.addr("kafka.embedded_broker", k.EmbeddedBroker)
	}
	for i, b := range k.Brokers {
		p.addr(fmt.Sprintf("kafka.brokers[%d]", i), b)
	}
	if k.Partitions < 1 || k.Partitions > 1024 {
		p.bad("kafka.partitions", k.Partitions, "must be in [1, 1024]")
	}
	switch k.SASL.Mechanism {
	case "":
	case "plain", "scram-sha-256", "scram-sha-512":
		if k.SASL.Username == "" {
			p.bad("kafka.sasl.username", "", "required with a SASL mechanism")
		}
	default:
		p.bad("kafka.sasl.mechanism", k.SASL.Mechanism, `must be "", "plain", "scram-sha-256" or "scram-sha-512"`)
	}
	if k.SASL.Mechanism != "" && !k.TLS.Enabled && !k.AllowPlaintextSASL {
		p.bad("kafka.sasl.mechanism", k.SASL.Mechanism, "sends its credentials without TLS: set kafka.tls.enabled, "+
			"or kafka.allow_plaintext_sasl: true for a network trusted not to be read")
	}
	if k.TopicPolicy != "enforce" && k.TopicPolicy != "warn" {
		p.bad("kafka.topic_policy", k.TopicPolicy, `must be "enforce" or "warn"`)
	}
	if k.TopicCheckInterval < 100*time.Millisecond {
		p.bad("kafka.topic_check_interval", k.TopicCheckInterval, "must be at least 100ms")
	}
	if k.Group == "" || k.LeaderGroup == "" || k.Group == k.LeaderGroup {
		p.bad("kafka.group", k.Group+","+k.LeaderGroup, "group and leader_group must be set and differ")
	}
	if k.SessionTimeout < time.Second || k.SessionTimeout > 5*time.Minute {
		p.bad("kafka.session_timeout", k.SessionTimeout, "must be in [1s, 5m]")
	}
	if (k.TLS.CertFile == "") != (k.TLS.KeyFile == "") {
		p.bad("kafka.tls", k.TLS.CertFile+","+k.TLS.KeyFile, "cert_file and key_file go together")
	}
	seen := map[string]string{}
	for _, t := range []struct{ path, name string }{
		{"kafka.topics.train", k.Topics.Train},
		{"kafka.topics.queries", k.Topics.Queries},
		{"kafka.topics.attributions", k.Topics.Attributions},
		{"kafka.topics.audits", k.Topics.Audits},
		{"kafka.topics.dlq", k.Topics.DLQ},
		{"kafka.topics.status", k.Topics.Status},
		{"kafka.topics.models", k.Topics.Models},
		{"kafka.topics.leader", k.Topics.Leader},
		{"kafka.topics.lineage", k.Topics.Lineage},
	} {
		if !validTopic(t.name) {
			p.bad(t.path, t.name, "must be 1-249 characters of [a-zA-Z0-9._-]")
		}
		if other, dup := seen[t.name]; dup && t.name != "" {
			p.bad(t.path, t.name, "same topic as "+other)
		}
		seen[t.name] = t.path
	}
}

// validateModelFile checks the ONNX settings: model.file excludes the built-in
// backbone's weights and seeded initialization, model.arch may only pin its digest, and
// model.params and model.allow_folded_batchnorm need the file.
func (c *Config) validateModelFile(p *problems) {
	m := c.Model
	if m.File == "" {
		if m.Arch == "onnx" || strings.HasPrefix(m.Arch, "onnx:") {
			p.bad("model.arch", m.Arch, "names an ONNX model: set model.file to its path")
		}
		if len(m.Params) > 0 {
			p.bad("model.params", m.Params, "selects an ONNX model's parameters: set model.file too")
		}
		if m.AllowFoldedBatchNorm {
			p.bad("model.allow_folded_batchnorm", true, "applies to an ONNX model: set model.file too")
		}
		return
	}
	if m.Weights != "" {
		p.bad("model.weights", m.Weights, fmt.Sprintf("cannot be combined with model.file (%q): the ONNX file holds the weights", m.File))
	}
	if m.Untrained {
		p.bad("model.untrained", true, fmt.Sprintf("cannot be combined with model.file (%q)", m.File))
	}
	if m.Arch != "" && m.Arch != Default().Model.Arch && m.Arch != "onnx" && !strings.HasPrefix(m.Arch, "onnx:") {
		p.bad("model.arch", m.Arch, fmt.Sprintf("names a built-in architecture, but model.file (%q) is set: leave model.arch at its default, or write onnx:<SHA-256 of the file> to pin it", m.File))
	}
	for _, g := range m.Params {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			p.bad("model.params", g, "must be a non-empty path.Match glob")
		}
	}
}

// validateModel checks the backbone, the sketch and the pool.
func (c *Config) validateModel(p *problems) {
	if c.Model.Arch == "" && c.Model.File == "" {
		p.bad("model.arch", "", "must not be empty (or set model.file)")
	}
	if c.Model.Untrained && c.Model.Weights != "" {
		p.bad("model.untrained", c.Model.Untrained, fmt.Sprintf("cannot be combined with model.weights (%q)", c.Model.Weights))
	}
	c.validateModelFile(p)
	if c.Sketch.H < 1 {
		p.bad("sketch.h", c.Sketch.H, "must be at least 1")
	}
	if c.Sketch.S < 0 {
		p.bad("sketch.s", c.Sketch.S, "must be 0 (no sketch) or positive")
	}
	if c.Pool.Budget == "" {
		if c.Pool.M < 1 {
			p.bad("pool.m", c.Pool.M, "must be at least 1 (or set pool.budget)")
		}
	} else if lam, ok := strings.CutPrefix(c.Pool.Budget, "deff:"); !ok {
		p.bad("pool.budget", c.Pool.Budget, `must be "deff:λ"`)
	} else if x, err := strconv.ParseFloat(lam, 64); err != nil || !(x > 0) || math.IsInf(x, 0) {
		p.bad("pool.budget", c.Pool.Budget, "λ must be a positive finite number")
	}
	if !(c.Pool.SyncStaleFraction > 0 && c.Pool.SyncStaleFraction <= 1) {
		p.bad("pool.sync_stale_fraction", c.Pool.SyncStaleFraction, "must be in (0, 1]")
	}
	if !(c.Pool.Tolerance >= 0 && c.Pool.Tolerance < 1) {
		p.bad("pool.tolerance", c.Pool.Tolerance, "must be in [0, 1)")
	}
}

// validateFit checks the fit recipe.
func (c *Config) validateFit(p *problems) {
	f := c.Fit
	switch f.Loss {
	case "bt", "simclr", "vicreg", "byol":
	default:
		p.bad("fit.loss", f.Loss, "must be bt, simclr, vicreg or byol")
	}
	switch f.Init {
	case "kaiming", "pci", "pci-lanczos", "csi", "aui", "krepes-pci":
	default:
		p.bad("fit.init", f.Init, "must be kaiming, pci, pci-lanczos, csi, aui or krepes-pci")
	}
	p.atLeast1(intField{"fit.k", f.K}, intField{"fit.epochs", f.Epochs}, intField{"fit.patience", f.Patience},
		intField{"fit.batch", f.Batch}, intField{"fit.fits", f.Fits})
	if !(f.LearningRate > 0) || math.IsInf(f.LearningRate, 0) {
		p.bad("fit.learning_rate", f.LearningRate, "must be positive and finite")
	}
	if !(f.WeightDecay >= 0) || math.IsInf(f.WeightDecay, 0) {
		p.bad("fit.weight_decay", f.WeightDecay, "must be non-negative and finite")
	}
	if !(f.ValFraction > 0 && f.ValFraction < 0.5) {
		p.bad("fit.val_fraction", f.ValFraction, "must be in (0, 0.5)")
	}
	if f.Precision != "float32" && f.Precision != "float64" {
		p.bad("fit.precision", f.Precision, "must be float32 or float64")
	}
}

// validateRefit checks the drift triggers.
func (c *Config) validateRefit(p *problems) {
	r := c.Refit
	if r.PointsChanged < 0 {
		p.bad("refit.points_changed", r.PointsChanged, "must be non-negative (0 disables)")
	}
	if !(r.PoolChangeFraction >= 0 && r.PoolChangeFraction <= 1) {
		p.bad("refit.pool_change_fraction", r.PoolChangeFraction, "must be in [0, 1] (0 disables)")
	}
	if !(r.ResidualIncrease >= 0) || math.IsInf(r.ResidualIncrease, 0) {
		p.bad("refit.residual_increase", r.ResidualIncrease, "must be non-negative and finite (0 disables)")
	}
	if r.Idle < 0 {
		p.bad("refit.idle", r.Idle, "must be non-negative (0 disables)")
	}
	if r.MinPoints < 8 {
		p.bad("refit.min_points", r.MinPoints, "must be at least 8")
	}
	if r.BacklogWait < 0 {
		p.bad("refit.backlog_wait", r.BacklogWait, "must be non-negative (0: never waits)")
	}
	if r.DeleteDebounce < 0 {
		p.bad("refit.delete_debounce", r.DeleteDebounce, "must be non-negative")
	}
}

// validateQuery checks the query and audit settings.
func (c *Config) validateQuery(p *problems) {
	q := c.Query
	p.atLeast1(intField{"query.k", q.K}, intField{"query.draw_queries", q.DrawQueries})
	if q.ExactMemoryBytes < 0 {
		p.bad("query.exact_memory_bytes", q.ExactMemoryBytes, "must be ≥ 0 (0 turns the exact model off)")
	}
	if q.GradientMemoryBytes < 0 {
		p.bad("query.gradient_memory_bytes", q.GradientMemoryBytes, "must be ≥ 0 (0 turns the gradient ranking off)")
	}
	if q.ExactDiskBytes < 0 {
		p.bad("query.exact_disk_bytes", q.ExactDiskBytes, "must be ≥ 0 (0 keeps exact rows in memory only)")
	}
	if q.ExactRowsCap < 0 {
		p.bad("query.exact_rows_cap", q.ExactRowsCap, "must be ≥ 0")
	}
	if !(q.Delta > 0 && q.Delta < 1) {
		p.bad("query.delta", q.Delta, "must be in (0, 1)")
	}
	if q.K > c.Limits.MaxK {
		p.bad("query.k", q.K, fmt.Sprintf("must not exceed limits.max_k (%d)", c.Limits.MaxK))
	}
	if _, err := certify.ParseRanking(q.Score); err != nil {
		p.bad("query.score", q.Score, err.Error())
	}
	if !(q.StableJaccard >= 0 && q.StableJaccard <= 1) {
		p.bad("query.stable_jaccard", q.StableJaccard, "must be in [0, 1]")
	}
	if q.ReseedQueries < 0 {
		p.bad("query.reseed_queries", q.ReseedQueries, "must be ≥ 0 (0 turns the measurement off)")
	}
	if a := c.Audit; a.Random < 1 || a.Reference < 2 || a.Test < 1 {
		p.bad("audit", fmt.Sprintf("random %d, reference %d, test %d", a.Random, a.Reference, a.Test), "need random ≥ 1, reference ≥ 2, test ≥ 1")
	}
}

// validateLimits checks the input and outbox bounds.
func (c *Config) validateLimits(p *problems) {
	l := c.Limits
	p.atLeast1(intField{"limits.max_message_bytes", l.MaxMessageBytes}, intField{"limits.max_id_bytes", l.MaxIDBytes},
		intField{"limits.max_k", l.MaxK}, intField{"limits.batch_events", l.BatchEvents}, intField{"limits.max_outbox", l.MaxOutbox})
}

// validateIngest checks the featurizers' timeout.
func (c *Config) validateIngest(p *problems) {
	if c.Ingest.FeaturizerTimeout <= 0 {
		p.bad("ingest.featurizer_timeout", c.Ingest.FeaturizerTimeout, "must be positive")
	}
}

// FieldError is one invalid setting.
type FieldError struct {
	Path   string // YAML path, e.g. "sketch.h"
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("config: %s = %q: %s", e.Path, e.Value, e.Reason)
}

// validTopic follows Kafka's topic name rule.
func validTopic(s string) bool {
	if s == "" || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r == '.' || r == '_' || r == '-' || r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}
