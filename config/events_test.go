package config

import (
	"testing"

	"github.com/cairnhq/cairn/stream"
)

// TestEventSource: the default ce_source is a function of the configuration (the
// training topic), valid as a CloudEvents source, and a configured one wins.
func TestEventSource(t *testing.T) {
	c := Default()
	if got, want := c.EventSource(), "urn:cairn:cairn.train"; got != want {
		t.Errorf("default EventSource = %q, want %q", got, want)
	}
	c.Kafka.Topics.Train = "prod.train"
	if got, want := c.EventSource(), "urn:cairn:prod.train"; got != want {
		t.Errorf("EventSource = %q, want %q", got, want)
	}
	if err := stream.ValidateSource(c.EventSource()); err != nil {
		t.Errorf("default source invalid: %v", err)
	}
	c.CloudEvents.Source = "https://cairn.example.org/prod"
	if got := c.EventSource(); got != c.CloudEvents.Source {
		t.Errorf("EventSource = %q, want the configured %q", got, c.CloudEvents.Source)
	}
}
