package fit

import (
	"context"
	"errors"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestAdamContextCancel: a cancelled context stops the fit with ctx.Err() before any step,
// and RepeatContext passes the cancellation through every fit; an uncancelled context
// gives the same result as Adam.
func TestAdamContextCancel(t *testing.T) {
	p := synthetic(3, 64, 12, 16, 8)
	init, err := Initialize(Kaiming, p, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	opt := DefaultOptions(BarlowTwins)
	opt.Epochs, opt.BatchSize = 2, 16
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := AdamContext(ctx, p, init.A0, opt); !errors.Is(err, context.Canceled) {
		t.Fatalf("AdamContext(cancelled) error = %v, want context.Canceled", err)
	}
	if _, err := RepeatContext(ctx, p, init, opt, 2, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("RepeatContext(cancelled) error = %v, want context.Canceled", err)
	}
	got, err := AdamContext(context.Background(), p, init.A0, opt)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Adam(p, init.A0, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(got.A, want.A) {
		t.Fatal("AdamContext(background) differs from Adam")
	}
}
