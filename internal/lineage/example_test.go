package lineage_test

import (
	"fmt"
	"time"

	"github.com/cairnhq/cairn/internal/lineage"
)

// A refit's START and COMPLETE events share the run id derived from the refit itself.
func ExampleProducer_RefitStart() {
	p := lineage.Producer{URI: "https://github.com/cairnhq/cairn", Kafka: "kafka://localhost:9092"}
	r := lineage.Refit{Job: lineage.Job{Namespace: "prod", Name: "refit"}, Previous: 4,
		Train: lineage.Topic{Name: "cairn.train", Offsets: []lineage.Offsets{{Partition: 0, First: 0, Last: 999}}}}
	start, err := p.RefitStart(r, time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		panic(err)
	}
	done, err := p.RefitComplete(r, lineage.Outcome{Models: "cairn.models", Version: 5}, time.Date(2026, 5, 1, 12, 1, 0, 0, time.UTC))
	if err != nil {
		panic(err)
	}
	fmt.Println(start.EventType, start.Run.RunID == r.RunID())
	fmt.Println(done.EventType, done.Run.RunID == start.Run.RunID, done.Outputs[0].Name)
	// Output:
	// START true
	// COMPLETE true cairn.models
}
