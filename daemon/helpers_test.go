package daemon

import (
	"os"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/storage"
)

// testLogger logs errors into the test's log; CAIRN_TEST_LOG=info (or debug) shows more.
func testLogger(t testing.TB) zerolog.Logger {
	level := zerolog.ErrorLevel
	if l, err := zerolog.ParseLevel(os.Getenv("CAIRN_TEST_LOG")); err == nil && l != zerolog.NoLevel {
		level = l
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(level)
}

func openStore(t testing.TB, path string) *storage.Store {
	t.Helper()
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
