package daemon

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/storage"
)

func testLogger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)
}

func openStore(t testing.TB, path string) *storage.Store {
	t.Helper()
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
