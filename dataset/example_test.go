package dataset_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairnhq/cairn/dataset"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "cairn-example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "train.csv"), []byte("id,x1,x2,label\na,0.5,1,0\nb,2,-1,1\n"), 0o644)

	s, err := dataset.Open("csv:"+filepath.Join(dir, "{split}.csv"), "train", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.N, s.D, s.Classes, s.IDs, s.Row(1))

	aug := s.Augmenter(7)
	v0, v1 := make([]float64, s.D), make([]float64, s.D)
	aug.ViewTo(v0, s.Row(0), s.IDs[0], 0)
	aug.ViewTo(v1, s.Row(0), s.IDs[0], 1)
	fmt.Println(v0[0] != v1[0])

	_, err = dataset.Open("csv:"+filepath.Join(dir, "train.csv"), "test", 0)
	fmt.Println(err != nil)
	// Output:
	// 2 2 2 [a b] [2 -1]
	// true
	// true
}
