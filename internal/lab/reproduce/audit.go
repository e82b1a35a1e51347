package reproduce

import (
	"errors"

	"github.com/cairnhq/cairn/internal/lab/offline"
)

// Auditor is cairnctl audit's identifiability table (paper appendix D) of model m on
// data set data: the deletion effect of each ranking's top-k landmarks against random
// random-sized k-sets drawn under seed. cairnctl passes its audit command's code.
type Auditor func(m *offline.Model, data string, k, random int, seed uint64) (*Audit, error)

// Audit is the part of the identifiability table that the tables read, per fit of the
// model (one entry per fit in every slice).
type Audit struct {
	// RandomEffects are Δ(R_t) of the random sets, per fit.
	RandomEffects [][]float64
	// Rankings are the rankings' rows, by name (displacement, contribution,
	// leave_one_out, reselection).
	Rankings map[string]*AuditRanking
}

// AuditRanking is one ranking's row of an Audit.
type AuditRanking struct {
	// PercentileMedian is the median over fits of π, the fraction of random deletions
	// that do strictly less damage than deleting the ranking's top-k.
	PercentileMedian float64
	Percentiles      []float64 // per fit
	Effects          []float64 // Δ of the ranking's top-k, per fit
}

// errNoAuditor reports a table that needs the identifiability table run without one.
var errNoAuditor = errors.New("reproduce: no Auditor (Command.Audit) for the identifiability cells")

// identifiability is r.audit of m under the run's seed.
func (r *runner) identifiability(m *offline.Model, data string, k, random int) (*Audit, error) {
	if r.audit == nil {
		return nil, errNoAuditor
	}
	return r.audit(m, data, k, random, r.seed)
}
