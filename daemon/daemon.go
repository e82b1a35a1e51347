package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/internal/admin"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/cluster"
	"github.com/cairnhq/cairn/internal/erasure"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/featsource"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/lag"
	"github.com/cairnhq/cairn/internal/lineage"
	"github.com/cairnhq/cairn/internal/metrics"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/query"
	"github.com/cairnhq/cairn/internal/refit"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/internal/status"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// StateFile is the bbolt file's name inside the data directory.
const StateFile = "cairn.db"

// Daemon is the long-running service cairnd runs. Run owns every component; the other
// methods are safe for concurrent use while it runs.
type Daemon struct {
	cfg     config.Config
	log     zerolog.Logger
	feat    *pipeline.Features
	pcfg    coreset.Config
	fitter  *refit.Fitter // the refits' fit and a restart's serving model (internal/refit)
	metrics *metrics.Set
	ready   chan struct{}
	ui      *ui.Recorder  // recent answers and the overview's series (ui.go)
	deff    atomic.Uint64 // float64 bits of view A's d_eff at the last sync (NaN before)

	// Set by Run before its goroutines start, read-only afterwards.
	store    *storage.Store
	kafka    stream.Config
	httpAddr string

	train trainState // the ingest and the refit baselines, under train.mu
	serve serveState // the serving model, changed under serve.mu, read lock-free
	query queryState // the query goroutine's own state
	// answers decodes, answers and accounts queries (internal/query).
	answers *query.Answerer
	refits  refitCounter // refit progress, read by /status and /metrics

	pool     atomic.Pointer[poolStatus]
	lag      lag.Poller // the consumer lag (runLag)
	stopping atomic.Bool

	// Faults (faults.go): what fails now, whether the broker answers, the publisher (for
	// its state) and the outbox's last measured length.
	faults *fault.Tracker
	broker fault.Broker
	pub    atomic.Pointer[stream.Publisher]
	outbox atomic.Int64
	// conn is the Kafka side (internal/cluster: the topics and their check and watch);
	// embedded is its in-process broker, nil with external brokers; compactWaits counts
	// the compactions waiting for the training reader (compact).
	conn         *cluster.Conn
	embedded     *stream.Broker
	compactWaits atomic.Int32
	// box publishes the outputs and the deletions' tombstones; featSrc reads the
	// featurizers' records when ingest.featurizers is set (featurizer.go).
	box     *ingest.Outbox
	featSrc *featsource.Source
	// signer signs every audit record (DataDir/audit.key, internal/auditsig).
	signer *auditsig.Signer
	// models is the models topic (models.go); leading says whether this daemon is the
	// deployment's writer now: a primary from its start (or once elected, with external
	// brokers), a standby once elected (leader.go), a replica never.
	models  modelsState
	leading atomic.Bool
	// drainAtStop says the daemon led when asked to stop: its outbox is drained then.
	drainAtStop atomic.Bool
	// direct writes a replica's outputs (it has no store, so no outbox).
	direct *stream.Writer
	// storeFaults is storage.Options.Faults of the state file (fault-injection tests).
	storeFaults func(site string) error
	// erasures is what /status and /metrics show of the data subjects' requests
	// (erasure.go).
	erasures erasure.Tracker
	// lineage writes the lineage events (lineage.go); the batch's planned erasures it
	// keeps are under train.mu.
	lineage lineage.Recorder
}

// trainState is the training side. mu guards the ingest (pool, point cache, pending
// deletions) and the refit baselines. The train handler holds it per batch, the refit
// supervisor while it syncs the pool and takes a snapshot.
type trainState struct {
	mu        sync.Mutex
	ingest    *ingest.State
	cache     atomic.Pointer[ingest.Points] // the ingest's point cache, for queries by id
	changes   int                           // points upserted or deleted since the last snapshot
	lastTrain time.Time
	lastFit   refit.Baseline
	lastSyncN int       // stored points at the last adopted sync
	retryAt   time.Time // no refit before this after a failed one
	heldSince time.Time // a drift refit waits for the backlog since (refit.Hold)
}

// serveState is the serving side. mu serializes changes of the serving model; readers
// load model lock-free.
type serveState struct {
	mu         sync.Mutex
	model      atomic.Pointer[serving.Model]
	removals   []serving.Removal // ids that left the pool (or were relabeled) since the running refit's snapshot
	modelReady chan struct{}
	modelOnce  sync.Once
	drawNonce  uint64
	drawCount  atomic.Uint64
	disk       *serving.Disk // exact rows past query.exact_memory_bytes (data_dir/exactrows)
}

// queryState belongs to the query goroutine: the last offset answered per partition
// and the answers' workspace.
type queryState struct {
	last map[partition]int64
	work serving.Workspace
}

// partition names a topic partition.
type partition struct {
	topic string
	part  int
}

// refitCounter is the refit supervisor's progress; kick wakes it.
type refitCounter struct {
	count   atomic.Uint64 // added to after last is stored: a count includes its refit's record
	last    atomic.Pointer[refitRecord]
	running atomic.Bool
	kick    chan struct{}
}

// refitRecord is the last completed refit's wall seconds and phases, stored together.
type refitRecord struct {
	secs   float64
	phases map[string]float64
}

// poolStatus is the ingest's state as last published by the train handler.
type poolStatus struct {
	points, landmarks, pending int
	residual                   [2]coreset.ResidualCertificate
	stats                      ingest.Stats
	labels                     map[string]LabelCount
}

// StatusReport is the daemon's state as /status and `cairnctl status` show it
// (status.Report); LabelCount one label's share of the points and landmarks.
type (
	StatusReport = status.Report
	LabelCount   = status.LabelCount
)

// New validates cfg and builds the feature pipeline (which checks the model and
// sketch). It opens nothing; Run does.
func New(cfg config.Config, log zerolog.Logger) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	feat, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		return nil, err
	}
	status.LogBackbone(log, feat, cfg)
	qlim, err := query.Limits(cfg, feat.InputDim())
	if err != nil {
		return nil, err
	}
	qlim.Indices = ingest.IndexLimits(feat)
	pcfg, err := ingest.PoolConfig(cfg, feat.Dim())
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		cfg: cfg, log: log, feat: feat, pcfg: pcfg, metrics: metrics.New(), ready: make(chan struct{}),
		ui:     ui.NewRecorder(cfg.UI.Answers, cfg.UI.Samples),
		serve:  serveState{modelReady: make(chan struct{})},
		refits: refitCounter{kick: make(chan struct{}, 1)},
		query:  queryState{last: map[partition]int64{}},
		lineage: lineage.Recorder{Namespace: cfg.Lineage.Namespace, Job: cfg.Lineage.Job,
			Lineage: cfg.Kafka.Topics.Lineage, Models: cfg.Kafka.Topics.Models, Audits: cfg.Kafka.Topics.Audits},
	}
	d.answers = query.New(query.Config{Daemon: cfg, Limits: qlim, Log: log, Metrics: d.metrics, UI: d.ui,
		Coverage: status.AnswerCoverage(feat), Points: d.train.cache.Load, Residuals: func() ([2]coreset.ResidualCertificate, bool) {
			if p := d.pool.Load(); p != nil {
				return p.residual, true
			}
			return [2]coreset.ResidualCertificate{}, false
		}})
	d.faults = fault.NewTracker(log, d.metrics.AddFaultRetry)
	d.erasures.Audits, d.erasures.Metrics = cfg.Kafka.Topics.Audits, d.metrics
	d.fitter = &refit.Fitter{Config: cfg, Features: feat, Pool: pcfg, Log: log, Serve: d.newServing}
	d.deff.Store(math.Float64bits(math.NaN()))
	d.serve.disk = serving.NewDisk(filepath.Join(cfg.DataDir, "exactrows"), cfg.Query.ExactDiskBytes)
	d.fitter.Disk = d.serve.disk
	return d, nil
}

// SetStoreFaults installs a fault injector on the state file's write sites
// (storage.Options.Faults) for fault-injection tests; call it before Run.
func (d *Daemon) SetStoreFaults(f func(site string) error) { d.storeFaults = f }

// Ready is closed once Run serves: the store is open, the broker is reachable and the
// readers have started.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// Brokers returns the bootstrap addresses the daemon uses (the embedded broker's
// address in the default mode). Valid after Ready is closed.
func (d *Daemon) Brokers() []string { return slices.Clone(d.kafka.Brokers) }

// HTTPAddr returns the bound HTTP address. Valid after Ready is closed.
func (d *Daemon) HTTPAddr() string { return d.httpAddr }

// Metrics returns the daemon's metrics (what /metrics exposes).
func (d *Daemon) Metrics() *metrics.Set { return d.metrics }

// Status reports the current state; safe for concurrent use.
func (d *Daemon) Status() StatusReport {
	st := StatusReport{Refits: d.refits.count.Load(), RefitRunning: d.refits.running.Load(), Queries: d.answers.Count(),
		Role: d.cfg.Role, Leading: d.leading.Load(), Backbone: status.BackboneOf(d.feat)}
	if r := d.refits.last.Load(); r != nil {
		st.RefitSeconds, st.RefitPhases = r.secs, r.phases
	}
	select {
	case <-d.ready: // after restore, which set featSrc
		st.Ready = !d.stopping.Load()
		if d.featSrc != nil {
			fs := d.featSrc.Stats()
			st.Features = &fs
		}
	default:
	}
	if p := d.pool.Load(); p != nil {
		st.Points, st.Landmarks, st.Ingest, st.PendingDeletions, st.Labels = p.points, p.landmarks, p.stats, p.pending, p.labels
		for v, c := range p.residual {
			st.Residual[v], st.Stale[v] = serving.ResidualOf(c), c.Stale
		}
	}
	if s := d.serve.model.Load(); s != nil {
		st.Model, st.ModelID, st.ModelPoints, st.Masked = s.Version, s.ID, s.Points, s.MaskedCount()
		st.VarianceModel, st.ExactRows = s.Variance()
		st.GradientRows, st.GradientRowsError = s.GradientRows()
	}
	st.Erasures = d.erasureStatus()
	st.Lag = d.lag.Lag()
	return st
}

// KafkaConfig is the stream configuration of cfg's external brokers (TLS and SASL
// included): cluster.KafkaConfig.
func KafkaConfig(cfg config.Config) stream.Config { return cluster.KafkaConfig(cfg) }

// Run serves until ctx is done, then shuts down: the readers and any refit stop, the
// outbox is drained to Kafka for at most cfg.ShutdownTimeout, HTTP stops, the embedded
// broker and the store close. It returns only after every goroutine it started has
// exited; the error is the first failure of a component (nil after a clean shutdown).
func (d *Daemon) Run(ctx context.Context) (err error) {
	switch d.cfg.Role {
	case "replica":
		return d.runReplica(ctx)
	case "featurizer":
		return d.runFeaturizer(ctx)
	}
	st, err := d.openState()
	if err != nil {
		return err
	}
	d.store = st
	defer func() { err = errors.Join(err, st.Close()) }()
	if err := d.loadSigner(); err != nil {
		return err
	}
	// HTTP first, so that /readyz says why while the daemon waits for a broker or restores.
	h, err := d.startHTTP()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.stop()) }()
	if err := d.connect(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.conn.Close()) }()
	if err := d.ensureErasures(ctx); err != nil {
		return err
	}
	if err := d.restore(); err != nil {
		return diagnose(st, err)
	}
	d.emitStatus("audit_key", d.AuditKey())
	w, err := stream.NewWriter(stream.WriterConfig{Kafka: d.kafka, OnWritten: d.tombstonesWritten, Events: cluster.Events(d.cfg)})
	if err != nil {
		return err
	}
	var erase func([]stream.Message) error
	if d.embedded != nil {
		erase = func(copies []stream.Message) error { return d.eraseFromBroker(w, copies) }
	}
	d.box = ingest.NewOutbox(st, d.cfg.Kafka.Topics.Train, d.conn.TrainPolicy, erase)
	defer func() { err = errors.Join(err, w.Close()) }()
	pub, err := stream.NewPublisher(w, d.box, stream.PublisherConfig{Ready: st.OutboxReady(),
		RetryMin: fault.RetryMin, RetryMax: fault.RetryMax, OnError: d.publishFailed, First: []string{d.cfg.Kafka.Topics.Models}})
	if err != nil {
		return err
	}
	d.pub.Store(pub)
	trainR, queryR, err := d.readers()
	if err != nil {
		return err
	}
	err = d.runComponents(ctx, h.failed, leader{pub: pub, w: w, queries: queryR}, trainR)
	if !d.drainAtStop.Load() {
		d.log.Info().Err(err).Msg("cairnd stopped (not leading: outbox kept)")
		return err
	}
	// Final drain: everything committed so far goes out, within the deadline.
	dctx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
	defer cancel()
	for {
		n, derr := pub.Drain(dctx)
		if derr != nil {
			err = errors.Join(err, fmt.Errorf("daemon: final outbox drain: %w", derr))
			break
		}
		if n == 0 {
			break
		}
	}
	d.log.Info().Err(err).Msg("cairnd stopped")
	return err
}

// httpServer is the admin endpoint running on a goroutine of its own: failed receives
// Run's error if it stops by itself; stop ends it and joins the goroutine.
type httpServer struct {
	failed <-chan error
	stop   func() error
}

// startHTTP binds and serves the admin endpoint until stop.
func (d *Daemon) startHTTP() (*httpServer, error) {
	checks := admin.Checks{Live: d.live, Ready: d.readyErr,
		Status: func() any { return d.Status() }, Model: func(v uint64) (any, error) { return d.Export(v) }, ModelStatus: modelStatus,
		AuditKey: func() any { return d.AuditKey() }}
	if d.cfg.UI.Enabled {
		checks.UI = d.uiHandler()
	}
	sec := admin.SecurityOf(d.cfg)
	h, err := admin.Listen(d.cfg.HTTP, d.metrics.Handler(), checks, sec, d.log)
	if err != nil {
		return nil, err
	}
	d.httpAddr = h.Addr()
	d.log.Info().Str("http", d.httpAddr).Bool("tls", sec.CertFile != "").Bool("token", sec.TokenFile != "").
		Bool("client_certificates", sec.ClientCAFile != "").Strs("open_paths", sec.OpenPaths).Msg("http listening")
	ctx, cancel := context.WithCancel(context.Background())
	done, failed := make(chan error, 1), make(chan error, 1)
	go func() {
		err := h.Run(ctx)
		if err != nil && ctx.Err() == nil {
			failed <- err
		}
		done <- err
	}()
	return &httpServer{failed: failed, stop: func() error {
		cancel()
		return errors.Join(<-done, h.Close())
	}}, nil
}

// connect connects to Kafka (cluster.Connect: the embedded broker, on which this daemon
// leads from its start, or the external one) and opens the models topic.
func (d *Daemon) connect(ctx context.Context) error {
	c, err := cluster.Connect(ctx, d.cfg, d.faults, d.log)
	if err != nil {
		return err
	}
	d.conn, d.kafka, d.embedded = c, c.Kafka, c.Embedded
	broker := d.cfg.Kafka.EmbeddedBroker
	if len(d.kafka.Brokers) > 0 {
		broker = d.kafka.Brokers[0]
	}
	d.lineage.Producer = lineage.Build(broker)
	if c.Embedded != nil {
		d.leading.Store(true) // nobody else can lead on this daemon's own broker
	}
	d.openModels()
	return nil
}

// readers builds the training and query readers, resuming after the stored offsets.
func (d *Daemon) readers() (train, queries *stream.Reader, err error) {
	cfg := d.cfg
	onErr := func(topic string, part int, err error) {
		d.log.Warn().Str("topic", topic).Int("partition", part).Err(err).Msg("fetch error (retrying)")
	}
	fetchMax := max(8<<20, 2*cfg.Limits.MaxMessageBytes)
	train, err = stream.NewReader(stream.ReaderConfig{Kafka: d.kafka, Topics: []string{cfg.Kafka.Topics.Train, stream.DefaultErasuresTopic},
		Start: d.startOffset, MaxBatch: cfg.Limits.BatchEvents, MaxWait: 100 * time.Millisecond, FetchMaxBytes: fetchMax, OnError: onErr, Ahead: d.train.ingest.Ahead})
	if err != nil {
		return nil, nil, err
	}
	queries, err = stream.NewReader(stream.ReaderConfig{Kafka: d.kafka, Topics: []string{cfg.Kafka.Topics.Queries},
		Start: d.startOffset, MaxBatch: 64, MaxWait: 10 * time.Millisecond, FetchMaxBytes: fetchMax, OnError: onErr})
	return train, queries, err
}

// runComponents runs a primary's or a standby's components (runGroups): the training
// reader, refits, lag, the UI's samples and the topic watch, and the leader's
// components. A primary on the embedded broker leads from its start (its publisher is
// a serve component); with external brokers the primary and its standbys elect the
// leader (internal/role/standby).
func (d *Daemon) runComponents(ctx context.Context, httpFailed <-chan error, l leader, trainR *stream.Reader) error {
	return d.runGroups(ctx, httpFailed, func(work, serve spawnFunc) error {
		work("train", func(c context.Context) error {
			return d.faults.KeepReading(c, "train", trainR, d.handleTrain, d.rebuildIngest)
		})
		work("refit", d.runRefits)
		work("lag", d.runLag)
		work("ui", d.runUISamples)
		work("topics", d.conn.Watch)
		if d.featSrc != nil {
			work("features", d.featSrc.Run)
		}
		if d.embedded != nil {
			d.log.Info().Msg("leading: primary on the embedded broker")
			work("lead", func(c context.Context) error { d.lead(c, l, false); return nil })
			serve("publisher", l.pub.Run)
			return nil
		}
		cand, ad, err := d.candidate(l)
		if err != nil {
			return err
		}
		work("models", d.models.follow.Run)
		work("adopt", ad.Run)
		work("election", cand.Run)
		return nil
	}, func() {
		d.log.Info().Str("role", d.cfg.Role).Str("data_dir", d.cfg.DataDir).Strs("brokers", d.kafka.Brokers).
			Str("http", d.httpAddr).Msg("cairnd serving")
	})
}

// spawnFunc starts the component f, named name, on a goroutine of its own.
type spawnFunc func(name string, f func(context.Context) error)

// runGroups runs the components start spawns until ctx ends, one fails, or HTTP fails,
// in two groups: work stops first; serve (the publisher of a daemon that leads from its
// start) keeps running until work has stopped, so that it drains what work committed.
// Once start has spawned them the daemon is ready, and serving logs so. It returns
// after every goroutine it started has exited, with the first failure joined with the
// others (nil after a clean shutdown).
func (d *Daemon) runGroups(ctx context.Context, httpFailed <-chan error, start func(work, serve spawnFunc) error, serving func()) (err error) {
	work, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	serve, stopServe := context.WithCancel(context.Background())
	defer stopServe()
	errc := make(chan error, 16)
	var workWG, serveWG sync.WaitGroup
	spawner := func(wg *sync.WaitGroup, c context.Context) spawnFunc {
		return func(name string, f func(context.Context) error) {
			wg.Go(func() {
				if err := f(c); err != nil {
					errc <- fmt.Errorf("daemon: %s: %w", name, err)
				}
			})
		}
	}
	if err = start(spawner(&workWG, work), spawner(&serveWG, serve)); err == nil {
		close(d.ready)
		serving()
		select {
		case <-ctx.Done():
		case err = <-errc:
			d.log.Error().Err(err).Msg("component failed; shutting down")
		case herr := <-httpFailed:
			err = fmt.Errorf("daemon: http: %w", herr)
			d.log.Error().Err(err).Msg("component failed; shutting down")
		}
	}
	d.drainAtStop.Store(d.leading.Load())
	d.stopping.Store(true)
	stopWork()
	workWG.Wait()
	stopServe()
	serveWG.Wait()
	close(errc)
	for e := range errc {
		err = errors.Join(err, e)
	}
	return err
}

// tombstonesWritten is the writer's OnWritten: the outbox notes where tombstones
// landed, and stores it when it acknowledges them.
func (d *Daemon) tombstonesWritten(msgs []stream.Message) {
	d.box.Written(msgs)
	d.erasuresWritten(msgs)
}

// eraseFromBroker makes the embedded broker drop the upserts of deleted points: it
// writes each tombstone once more, with its version header (the first copy must leave
// the last batch of its partition, which compaction keeps whole), and compacts (the
// outbox's erasure) once the training reader has read them (compact).
func (d *Daemon) eraseFromBroker(w *stream.Writer, copies []stream.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Write(ctx, copies...); err != nil {
		return err
	}
	return d.compact(ctx)
}

// compact compacts the embedded broker once the training reader has read every record
// of the training topic written before the call (cluster.Conn.Compact). Compaction
// keeps only the newest record of each id, so a record the reader has not read yet (an
// upsert written just before a tombstone or a republication of its id) would be gone
// before it was applied; once read, a record behind a claim is applied and the claim
// answered (ingest doc.go, "Versions"). It waits at most until ctx ends; a daemon that
// is stopping, whose reader has stopped, does not wait, and leaves the compaction (and
// the acknowledgement of the tombstones it erases) to its next start. While it waits,
// the outbox does not back-pressure the reader (waitOutbox).
func (d *Daemon) compact(ctx context.Context) error {
	d.compactWaits.Add(1)
	defer d.compactWaits.Add(-1)
	read := func(part int) (int64, bool, error) { return d.readOffset(d.cfg.Kafka.Topics.Train, part) }
	return d.conn.Compact(ctx, read, d.stopping.Load)
}

// TopicConfigs are the settings of the topics cairnd creates under cfg
// (cluster.TopicConfigs: the audit topic keeps every record, the training topic is
// compacted); a deployment (or a test) that creates the topics itself gives them these.
func TopicConfigs(cfg config.Config) map[string]map[string]string { return cluster.TopicConfigs(cfg) }

// modelStatus is the HTTP status of an error of Export: 404 for a version that is not
// stored, 503 before the first model, 500 otherwise.
func modelStatus(err error) int {
	switch {
	case errors.Is(err, ErrUnknownModel):
		return http.StatusNotFound
	case errors.Is(err, ErrNoModelExport):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// publishFailed is the publisher's OnError: the outputs stay in the outbox and go out
// once the broker answers again (logged once per faultLogEvery).
func (d *Daemon) publishFailed(err error, failures int, retryIn time.Duration) {
	d.metrics.AddPublishRetry()
	if failures == 1 || failures%50 == 0 {
		d.log.Warn().Err(err).Int("failures", failures).Dur("retry_in", retryIn).Msg("publishing the outbox failed; retrying")
	}
}

// AuditKeyFile is the audit signing key's file name inside the data directory.
const AuditKeyFile = "audit.key"

// AuditKey is the audit signing key as published (GET /audit/key, the audit_key
// status event, cairnctl audit key).
type AuditKey struct {
	PublicKey string `json:"public_key"` // Ed25519, hex
	KeyID     string `json:"key_id"`
}

// loadSigner reads DataDir/audit.key, or creates it at the first start.
func (d *Daemon) loadSigner() error {
	s, created, err := auditsig.LoadOrCreate(filepath.Join(d.cfg.DataDir, AuditKeyFile))
	if err != nil {
		return err
	}
	d.signer = s
	if created {
		d.log.Info().Str("key_id", s.KeyID()).Str("public_key", s.PublicKeyHex()).Msg("audit signing key created")
	}
	return nil
}

// AuditKey returns the audit key's public half; valid once Run has started.
func (d *Daemon) AuditKey() AuditKey {
	return AuditKey{PublicKey: d.signer.PublicKeyHex(), KeyID: d.signer.KeyID()}
}

// openState opens the state file under DataDir, checking it first with
// check_on_start.
func (d *Daemon) openState() (*storage.Store, error) {
	if err := os.MkdirAll(d.cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("daemon: data dir: %w", err)
	}
	return storage.Open(filepath.Join(d.cfg.DataDir, StateFile), storage.Options{Check: d.cfg.CheckOnStart, Faults: d.storeFaults})
}

// diagnose returns err, a failed restore, with the damage the state file's full check
// finds when the restore met something inconsistent (a damaged page can read as records
// that disagree with each other, which the restore reports as a pool-state mismatch).
func diagnose(st *storage.Store, err error) error {
	if !errors.Is(err, ErrPoolState) && !errors.Is(err, storage.ErrCorrupt) {
		return err
	}
	rep, cerr := st.Check()
	if cerr != nil || rep.OK {
		return err
	}
	return errors.Join(err, &storage.DamageError{Path: st.Path(), Reason: fmt.Sprintf(
		"the full check finds %d problems (`cairnctl check` lists them), first: %s", rep.ProblemCount, rep.Problems[0])})
}

// restore builds the ingest from the store, loads the serving model, and sets the
// baselines the refit triggers compare against.
func (d *Daemon) restore() error {
	in, err := ingest.New(d.cfg, d.store, d.log)
	if err != nil {
		return err
	}
	in.SetHooks(ingest.Hooks{Removing: d.removing, Relabeling: d.relabeling, Describe: d.describeRecord, Unknown: d.auditUnknown, Commit: d.commitBatch})
	if err := d.useFeaturizers(in); err != nil {
		return err
	}
	d.train.ingest = in
	d.train.cache.Store(in.Points())
	offs, err := d.store.Offsets()
	if err != nil {
		return err
	}
	// The evaluation draws of this process are named apart from every earlier
	// process's: the nonce is the number of input messages consumed before it started.
	for _, o := range offs {
		d.serve.drawNonce += uint64(o.Offset) + 1
		if o.Topic == d.cfg.Kafka.Topics.Queries {
			d.query.last[partition{o.Topic, int(o.Partition)}] = o.Offset
		}
	}
	s, hash, err := d.fitter.Restore(d.store, d.train.cache.Load())
	if err != nil {
		return err
	}
	d.train.mu.Lock()
	defer d.train.mu.Unlock()
	if s != nil {
		d.install(s, 0)
	}
	if snap, err := in.Snapshot(); err != nil {
		return err
	} else if s == nil || ingest.PointsHash(snap.IDs, snap.Entries) != hash {
		// The stored points differ from the model's: the idle trigger refits.
		d.train.changes = max(1, len(snap.IDs))
	}
	if s != nil {
		d.train.lastFit = refit.Baseline{Points: s.Points, Landmarks: s.LandmarkIDs, Ratio: refit.Ratio(in.Residuals())}
	}
	d.publishPool()
	return nil
}

// readOffset is the last offset read of a partition: for the training topic the
// ingest's (tombstones included, which store no offset), else the stored one.
func (d *Daemon) readOffset(topic string, part int) (int64, bool, error) {
	if topic == d.cfg.Kafka.Topics.Train {
		d.train.mu.Lock()
		defer d.train.mu.Unlock()
		off, ok := d.train.ingest.Applied(topic, part)
		return off, ok, nil
	}
	return d.startOffset(topic, part)
}

// startOffset is the readers' stream.StartFunc: the last applied offset in the store.
func (d *Daemon) startOffset(topic string, part int) (int64, bool, error) {
	var (
		off int64
		ok  bool
	)
	err := d.store.View(func(tx *storage.ReadTx) error {
		var err error
		off, ok, err = tx.Offset(topic, int32(part))
		return err
	})
	return off, ok, err
}

// live is /healthz: the daemon answers while its components run.
func (d *Daemon) live() error { return nil }

// readyErr is /readyz: starting, shutting down, or the readiness of a running daemon.
func (d *Daemon) readyErr() error {
	select {
	case <-d.ready:
	default:
		return errors.New("starting")
	}
	if d.stopping.Load() {
		return errors.New("shutting down")
	}
	return d.readiness()
}

// handleTrain applies one batch of cairn.train.
func (d *Daemon) handleTrain(ctx context.Context, batch []stream.Message) error {
	if err := d.waitOutbox(ctx); err != nil {
		return err
	}
	d.train.mu.Lock()
	res, err := d.train.ingest.Apply(ctx, batch)
	d.models.maskDirty = false // enqueued with the batch, or the batch did not commit
	if err == nil {
		d.serveStored(res.Stored)
		d.train.changes += res.Upserts + res.Deletes + res.Erased
		if res.Upserts+res.Deletes+res.Erased > 0 {
			d.train.lastTrain = time.Now()
		}
		d.publishPool()
	}
	d.train.mu.Unlock()
	if err != nil {
		return err
	}
	d.faults.Recovered("train")
	topic := d.cfg.Kafka.Topics.Train
	d.metrics.AddEvents(topic, "applied", res.Upserts+res.Deletes)
	d.metrics.AddEvents(topic, "dead_letter", res.DeadLetters)
	d.metrics.AddEvents(topic, "skipped", res.Skipped)
	d.metrics.AddEvents(topic, "missing", res.Missing)
	for _, r := range res.Reasons {
		d.metrics.AddReject(string(r), 1)
	}
	for _, rec := range res.Deleted {
		if rec.Known {
			d.metrics.ObserveDeletion(rec.WasLandmark)
		} else {
			d.metrics.ObserveUnknownDeletion()
		}
	}
	if res.Deletes > 0 {
		d.poke()
	}
	return nil
}

// poke wakes the refit supervisor.
func (d *Daemon) poke() {
	select {
	case d.refits.kick <- struct{}{}:
	default:
	}
}

// publishPool publishes the ingest's state for Status and metrics; d.train.mu is held.
func (d *Daemon) publishPool() {
	in := d.train.ingest
	lms := in.Landmarks()
	p := &poolStatus{points: in.Len(), landmarks: len(lms), pending: in.PendingCount(),
		residual: in.Residuals(), stats: in.Stats()}
	if c := d.train.cache.Load(); c != nil {
		stored, pooled := c.LabelCounts(), map[int64]int{}
		for _, id := range lms {
			if e := c.Get(id); e != nil && e.HasLabel {
				pooled[e.Label]++
			}
		}
		if len(stored) > 0 {
			p.labels = make(map[string]LabelCount, len(stored))
			for l, n := range stored {
				p.labels[strconv.FormatInt(l, 10)] = LabelCount{Points: n, Landmarks: pooled[l]}
			}
		}
		d.metrics.SetLabels(stored, pooled)
	}
	d.pool.Store(p)
	d.metrics.SetPool(p.points, p.landmarks)
	d.publishErasures(in)
	for v, name := range []string{"A", "B"} {
		c := p.residual[v]
		d.metrics.SetResidual(name, c.Trace, c.TraceK, c.Exact)
	}
}

// describe fills the serving-model fields of a deletion record (ingest hook).
func (d *Daemon) describe(rec *ingest.Deletion) {
	s := d.serve.model.Load()
	if s == nil {
		return
	}
	rec.Before, rec.ModelBefore, rec.WasLandmark = s, s.Version, s.IsLandmark(rec.ID)
}

// removing masks the landmark terms of points that leave the pool (ingest hook, called
// before their batch commits).
func (d *Daemon) removing(ids []string) {
	d.serve.mu.Lock()
	defer d.serve.mu.Unlock()
	d.serve.removals = serving.AppendRemovals(d.serve.removals, ids, false)
	if s := d.serve.model.Load(); s != nil {
		// The mask goes on the models topic in this batch's transaction (commitMask),
		// also when a retried batch finds the model masked already.
		d.models.maskDirty = true
		d.models.pub.EraseDue()
		if ns := s.WithMask(ids); ns != s {
			d.serve.model.Store(ns)
			d.models.pub.Kick() // republish the version without the deleted rows
			d.metrics.SetModel(ns.Version, ns.MaskedCount())
			d.log.Info().Uint64("model", ns.Version).Int("masked", ns.MaskedCount()).Msg("deleted landmarks left the serving encoder")
		}
	}
}

// serveStored gives the serving model gradient rows for the stored points ids that it
// lacks, so the gradient ranking ranks them before a refit.
func (d *Daemon) serveStored(ids []string) {
	d.serve.mu.Lock()
	defer d.serve.mu.Unlock()
	d.serve.model.Store(d.fitter.WithStored(d.serve.model.Load(), d.train.cache.Load(), ids))
}

// relabeling masks the gradient rows of points whose label alone changes (ingest hook,
// called before their batch commits); replicas hold no gradient rows, so nothing is
// published.
func (d *Daemon) relabeling(ids []string) {
	d.serve.mu.Lock()
	defer d.serve.mu.Unlock()
	d.serve.removals = serving.AppendRemovals(d.serve.removals, ids, true)
	if s := d.serve.model.Load(); s != nil {
		d.serve.model.Store(s.WithGradMask(ids))
	}
}

// auditUnknown writes the audit of a deletion of an id that is not stored (ingest hook,
// inside the batch transaction): nothing changed, so no refit is needed.
func (d *Daemon) auditUnknown(tx *storage.Tx, rec *ingest.Deletion) (bool, error) {
	if !d.leading.Load() {
		return false, nil // pending: the leader's audit of it is adopted, or this daemon audits it once it leads
	}
	complete, err := d.lineage.AuditedAtOnce(tx, rec, d.servingVersion) // an erasure's lineage START
	if err != nil {
		return false, err
	}
	a, err := ingest.AppendAudit(tx, d.cfg.Kafka.Topics.Audits, rec, d.serve.model.Load(), rec.Applied, d.signer)
	if err != nil {
		return false, err
	}
	if err := complete(a); err != nil {
		return false, err
	}
	return true, d.checkpoint(tx, a)
}

// Checkpoint is a signed chain head (an audit_checkpoint status event): the last
// audit's seq and hash, signed by the audit key (auditsig.SignCheckpoint), so that an
// operator can anchor the chain outside cairn and a verifier can start from it.
type Checkpoint struct {
	Seq   uint64 `json:"seq"`
	Hash  string `json:"hash"`
	KeyID string `json:"key_id"`
	Sig   string `json:"sig"`
}

// checkpoint enqueues, in tx, the checkpoint of the chain head last (just appended).
func (d *Daemon) checkpoint(tx *storage.Tx, last stream.Audit) error {
	h, err := hex.DecodeString(last.Hash)
	if err != nil || len(h) != 32 {
		return fmt.Errorf("daemon: audit %d hash %q: %v", last.Seq, last.Hash, err)
	}
	head := [32]byte(h)
	return statusEvent(tx, d.cfg.Kafka.Topics.Status, "audit_checkpoint", Checkpoint{Seq: last.Seq, Hash: last.Hash,
		KeyID: d.signer.KeyID(), Sig: hex.EncodeToString(d.signer.SignCheckpoint(last.Seq, head))})
}

// install makes s the serving model, masking the points removed since the snapshot it
// was fitted on (removals[mark:]).
func (d *Daemon) install(s *serving.Model, mark int) {
	d.serve.mu.Lock()
	s = s.WithRemovals(d.serve.removals[min(mark, len(d.serve.removals)):])
	d.serve.removals = d.serve.removals[:0]
	old := d.serve.model.Swap(s)
	d.serve.mu.Unlock()
	if old != nil && old.Draw != s.Draw {
		d.retire(old.Version, old.Draw)
	}
	d.metrics.SetModel(s.Version, s.MaskedCount())
	d.serve.modelOnce.Do(func() { close(d.serve.modelReady) })
}

// runLag refreshes the consumer lag every second (lag.Poller: end offsets from the
// broker against the applied offsets in the store), and with it the outbox length and
// whether the broker answers.
func (d *Daemon) runLag(ctx context.Context) error {
	d.lag.Kafka, d.lag.Log, d.lag.Applied = d.kafka, d.log, d.readOffset
	d.lag.Topics = []string{d.cfg.Kafka.Topics.Train, d.cfg.Kafka.Topics.Queries}
	d.lag.Broker, d.lag.Faults, d.lag.Metrics = &d.broker, d.faults, d.metrics
	d.lag.Tick = func() {
		if n, err := d.store.OutboxSpan(); err == nil {
			d.outbox.Store(int64(n))
			d.metrics.SetOutbox(n)
		}
	}
	return d.lag.Run(ctx)
}

// statusEvent enqueues a cairn.status event of kind with data (JSON) in tx.
func statusEvent(tx *storage.Tx, topic, kind string, data any) error {
	v, err := statusValue(kind, data)
	if err != nil {
		return err
	}
	_, err = tx.Enqueue(topic, []byte(kind), v)
	return err
}

// statusValue encodes a cairn.status event of kind with data (JSON), stamped now.
func statusValue(kind string, data any) ([]byte, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return stream.Status{Kind: kind, Time: time.Now().UTC(), Data: b}.Encode()
}
