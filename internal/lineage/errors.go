package lineage

import "errors"

// ErrInvalid marks a run description that cannot make a valid event (an empty name, a
// malformed hash, a non-finite number). The builders join one error per problem, each
// wrapping it and naming the field.
var ErrInvalid = errors.New("lineage: invalid run")
