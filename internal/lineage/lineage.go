package lineage

import (
	"encoding/json"

	"github.com/cairnhq/cairn/schemas"
)

// OpenLineage's schema URLs that events and standard facets name.
const (
	// SpecURL is the OpenLineage specification version these events follow.
	SpecURL = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
	// RunEventSchemaURL is every event's schemaURL.
	RunEventSchemaURL = SpecURL + "#/$defs/RunEvent"
	// DatasetVersionSchemaURL is the standard facet "version" of an output dataset.
	DatasetVersionSchemaURL = "https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json#/$defs/DatasetVersionDatasetFacet"
	// ErrorMessageSchemaURL is the standard run facet "errorMessage" of a FAIL event.
	ErrorMessageSchemaURL = "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"
)

// FacetSchemaURL returns the _schemaURL of cairn's custom facet def (a $defs entry of
// the lineage schema in package schemas, such as "CertificateRunFacet").
func FacetSchemaURL(def string) string { return schemas.URI("lineage") + "#/$defs/" + def }

// EventType is a run's state transition. cairn emits START, then COMPLETE or FAIL.
type EventType string

// The transitions cairn emits.
const (
	Start    EventType = "START"
	Complete EventType = "COMPLETE"
	Fail     EventType = "FAIL"
)

// RunEvent is an OpenLineage RunEvent. Encode writes it as the value of a cairn.lineage
// record, keyed by Run.RunID.
type RunEvent struct {
	EventType EventType       `json:"eventType"`
	EventTime string          `json:"eventTime"` // RFC 3339, UTC
	Run       Run             `json:"run"`
	Job       Job             `json:"job"`
	Inputs    []InputDataset  `json:"inputs"`
	Outputs   []OutputDataset `json:"outputs"`
	Producer  string          `json:"producer"`
	SchemaURL string          `json:"schemaURL"`
}

// Encode writes e as JSON. The same event gives the same bytes: facets are maps,
// which encoding/json writes in key order.
func (e RunEvent) Encode() ([]byte, error) { return json.Marshal(e) }

// Run is a run's id and facets (keys: cairn_model, cairn_certificate, cairn_coverage,
// cairn_auditChain, cairn_erasure, errorMessage).
type Run struct {
	RunID  string         `json:"runId"`
	Facets map[string]any `json:"facets,omitempty"`
}

// Job names the job a run belongs to.
type Job struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// InputDataset is a topic a run read, with the offsets it applied (input facet
// cairn_offsets).
type InputDataset struct {
	Namespace   string         `json:"namespace"`
	Name        string         `json:"name"`
	InputFacets map[string]any `json:"inputFacets,omitempty"`
}

// OutputDataset is a topic a run wrote; the models topic carries the model version as
// the standard facet "version".
type OutputDataset struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Facets    map[string]any `json:"facets,omitempty"`
}

// BaseFacet is what every facet carries: who wrote it and the schema it follows.
type BaseFacet struct {
	Producer  string `json:"_producer"`
	SchemaURL string `json:"_schemaURL"`
}

// ModelFacet (run facet cairn_model) is the model version a refit made, or the one
// serving after an erasure, and its content id.
type ModelFacet struct {
	BaseFacet
	Version uint64 `json:"version"`
	ID      string `json:"id,omitempty"`
}

// CertificateFacet (run facet cairn_certificate) is the pool's residual certificate per
// view when the run ended.
type CertificateFacet struct {
	BaseFacet
	Views []ViewResidual `json:"views"`
}

// ViewResidual is one view's tr R and tr K; Exact false: TraceR is an upper bound.
type ViewResidual struct {
	View   string  `json:"view"`
	TraceR float64 `json:"traceR"`
	TraceK float64 `json:"traceK"`
	Exact  bool    `json:"exact"`
}

// CoverageFacet (run facet cairn_coverage) is the share of the backbone's parameters
// the kernel covers.
type CoverageFacet struct {
	BaseFacet
	ParameterShare float64 `json:"parameterShare"`
}

// AuditChainFacet (run facet cairn_auditChain) is the audit chain's head.
type AuditChainFacet struct {
	BaseFacet
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// ErasureFacet (run facet cairn_erasure) names an erasure's request and subject, the
// subject only by its keyed hash; Points is how many points it erased (COMPLETE only).
type ErasureFacet struct {
	BaseFacet
	Request     string `json:"request"`
	SubjectHash string `json:"subjectHash"`
	Points      *int   `json:"points,omitempty"`
}

// OffsetsFacet (input facet cairn_offsets) is the offsets of a topic a run applied,
// sorted by partition.
type OffsetsFacet struct {
	BaseFacet
	Partitions []Offsets `json:"partitions"`
}

// Offsets is a partition's applied offsets, First to Last inclusive.
type Offsets struct {
	Partition int   `json:"partition"`
	First     int64 `json:"first"`
	Last      int64 `json:"last"`
}

// DatasetVersionFacet is OpenLineage's standard dataset facet "version".
type DatasetVersionFacet struct {
	BaseFacet
	DatasetVersion string `json:"datasetVersion"`
}

// ErrorMessageFacet is OpenLineage's standard run facet "errorMessage".
type ErrorMessageFacet struct {
	BaseFacet
	Message             string `json:"message"`
	ProgrammingLanguage string `json:"programmingLanguage"`
}
