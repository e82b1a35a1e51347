package config

import (
	"flag"
	"strings"
)

// Flags are the command-line settings of cairnd (the operator contract names them). A flag
// overrides the file and the environment only when it is given explicitly.
type Flags struct {
	Config         string
	DataDir        string
	EmbeddedBroker string
	HTTP           string
	Brokers        string
	Arch           string
	Weights        string
	Untrained      bool
	// Model is an ONNX file (model.file) and Params its kernel's parameter globs,
	// comma-separated (model.params).
	Model  string
	Params string
	Role   string
	// The guard of the HTTP surface (http_tls, http_auth).
	HTTPCertFile     string
	HTTPKeyFile      string
	HTTPTokenFile    string
	HTTPClientCAFile string
}

// RegisterFlags defines cairnd's flags on fs with the documented defaults.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	d := Default()
	f := &Flags{}
	fs.StringVar(&f.Config, "config", "", "YAML configuration file (optional; defaults are the embedded mode)")
	fs.StringVar(&f.DataDir, "data-dir", d.DataDir, "directory for the bbolt state and the embedded broker")
	fs.StringVar(&f.EmbeddedBroker, "embedded-broker", d.Kafka.EmbeddedBroker, "listen address of the embedded Kafka broker (used when --brokers is empty)")
	fs.StringVar(&f.HTTP, "http", d.HTTP, "listen address of the HTTP surface (/healthz, /readyz, /metrics, /status, /model, /audit/key, /ui); beyond loopback it needs --http-cert-file and --http-token-file or --http-client-ca-file")
	fs.StringVar(&f.Brokers, "brokers", "", "comma-separated bootstrap servers of an external Kafka (disables the embedded broker)")
	fs.StringVar(&f.Arch, "arch", d.Model.Arch, "backbone architecture spec, e.g. mlp:784-256-10")
	fs.StringVar(&f.Weights, "weights", "", "safetensors file with the backbone's PyTorch state_dict, or shipped:NAME (default: the shipped trained weights for --arch)")
	fs.StringVar(&f.Model, "model", "", "an ONNX export (FILE.onnx) to use as the backbone instead of --arch (model.file); cairnctl model inspect FILE.onnx shows what cairn sees in it")
	fs.StringVar(&f.Params, "params", "", "comma-separated initializer-name globs selecting the --model's kernel parameters, e.g. 'layer3.*,fc.*' (model.params; default: all)")
	fs.StringVar(&f.Role, "role", d.Role, "primary (ingestion, refits, deletions, audits, model versions), replica (answers queries from the models topic), standby (follows the training topic; leads when the primary is gone) or featurizer (computes the training upserts' features to cairn.features, in a consumer group; needs --brokers)")
	fs.BoolVar(&f.Untrained, "untrained", false, "use the seeded untrained network instead of trained weights (a test fixture)")
	fs.StringVar(&f.HTTPCertFile, "http-cert-file", "", "PEM certificate chain of the HTTP server (http_tls.cert_file; with --http-key-file the server speaks HTTPS only)")
	fs.StringVar(&f.HTTPKeyFile, "http-key-file", "", "PEM private key of --http-cert-file (http_tls.key_file)")
	fs.StringVar(&f.HTTPTokenFile, "http-token-file", "", "file holding the bearer token every HTTP request but the open paths must send (http_auth.token_file; mode 0600 or stricter)")
	fs.StringVar(&f.HTTPClientCAFile, "http-client-ca-file", "", "PEM CAs whose client certificates authenticate HTTP requests (http_auth.client_ca_file; needs --http-cert-file)")
	return f
}

// Load parses nothing: it builds the configuration from the file named by --config, the
// CAIRN_* variables in environ, and then the flags that were set explicitly on fs (which
// must already be parsed).
func (f *Flags) Load(fs *flag.FlagSet, environ []string) (Config, error) {
	c, err := Load(f.Config, environ)
	if err != nil {
		return c, err
	}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "data-dir":
			c.DataDir = f.DataDir
		case "embedded-broker":
			c.Kafka.EmbeddedBroker = f.EmbeddedBroker
		case "http":
			c.HTTP = f.HTTP
		case "brokers":
			c.Kafka.Brokers = splitList(f.Brokers)
		case "arch":
			c.Model.Arch = f.Arch
		case "weights":
			c.Model.Weights = f.Weights
		case "model":
			c.Model.File = f.Model
		case "params":
			c.Model.Params = splitList(f.Params)
		case "role":
			c.Role = f.Role
		case "untrained":
			c.Model.Untrained = f.Untrained
		case "http-cert-file":
			c.HTTPTLS.CertFile = f.HTTPCertFile
		case "http-key-file":
			c.HTTPTLS.KeyFile = f.HTTPKeyFile
		case "http-token-file":
			c.HTTPAuth.TokenFile = f.HTTPTokenFile
		case "http-client-ca-file":
			c.HTTPAuth.ClientCAFile = f.HTTPClientCAFile
		}
	})
	return c, nil
}

// splitList is a comma-separated flag value as a list, blanks trimmed and empty items
// dropped (nil for none).
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
