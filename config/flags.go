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
	Role           string
}

// RegisterFlags defines cairnd's flags on fs with the documented defaults.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	d := Default()
	f := &Flags{}
	fs.StringVar(&f.Config, "config", "", "YAML configuration file (optional; defaults are the embedded mode)")
	fs.StringVar(&f.DataDir, "data-dir", d.DataDir, "directory for the bbolt state and the embedded broker")
	fs.StringVar(&f.EmbeddedBroker, "embedded-broker", d.Kafka.EmbeddedBroker, "listen address of the embedded Kafka broker (used when --brokers is empty)")
	fs.StringVar(&f.HTTP, "http", d.HTTP, "listen address for /healthz, /readyz, /metrics and /status")
	fs.StringVar(&f.Brokers, "brokers", "", "comma-separated bootstrap servers of an external Kafka (disables the embedded broker)")
	fs.StringVar(&f.Arch, "arch", d.Model.Arch, "backbone architecture spec, e.g. mlp:784-256-10")
	fs.StringVar(&f.Weights, "weights", "", "safetensors file with the backbone's PyTorch state_dict, or shipped:NAME (default: the shipped trained weights for --arch)")
	fs.StringVar(&f.Role, "role", d.Role, "primary (ingestion, refits, deletions, audits, model versions), replica (answers queries from the models topic) or standby (follows the training topic; leads when the primary is gone)")
	fs.BoolVar(&f.Untrained, "untrained", false, "use the seeded untrained network instead of trained weights (a test fixture)")
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
			c.Kafka.Brokers = nil
			for _, b := range strings.Split(f.Brokers, ",") {
				if b = strings.TrimSpace(b); b != "" {
					c.Kafka.Brokers = append(c.Kafka.Brokers, b)
				}
			}
		case "arch":
			c.Model.Arch = f.Arch
		case "weights":
			c.Model.Weights = f.Weights
		case "role":
			c.Role = f.Role
		case "untrained":
			c.Model.Untrained = f.Untrained
		}
	})
	return c, nil
}
