// Package featsource is the primary's side of cairn.features: a Source reads the
// feature records the featurizers write (internal/role/featurizer, format
// internal/featrec), files them by their training event (partition and offset), and
// hands them to the ingest when it applies that event (Source implements
// ingest.FeatureSource). It is used when ingest.featurizers is true.
//
// # What it trusts
//
// Nothing: it reads only a record's header to file it (featrec.Peek), and ignores the
// records of another training topic (a features topic shared by deployments). The ingest
// decodes every record it is handed, checksum included, and applies it only when its
// pipeline fingerprint, source topic, partition, offset, id and dimension are its own
// (internal/ingest doc.go "Featurizers"); anything else is dead-lettered there
// (feature_mismatch). Messages that do not even carry a header are returned by the
// next Lookup for the same treatment. So a record can make ingestion wait, never make
// it apply other features than its own.
//
// # Bounds and offsets
//
// The Source reads every partition of the features topic from its first retained
// offset whenever it (re)starts, and stores no offset: what it holds is a cache, and a
// record it never sees is computed by the primary. A record at or below its floor (the
// last applied offset of its training partition: Config.Applied at start and when the
// partition's share is full, and the highest offset each Lookup asked for) is dropped. The
// records held are bounded by Config.MaxBytes, in equal shares per training
// partition: a partition whose share is full stops reading (its fetches wait) until
// the primary takes or passes its records, so a primary far behind its featurizers
// reads the features topic as fast as it applies the training topic. The other
// partitions read on meanwhile (each is filed by a goroutine of its own): the
// primary applies the partitions in the interleaving its own reader happens to
// deliver, and with one bound for all of them a backlog filled the buffer with
// partitions it was not applying, so the partition it waited for could not be read
// and every such batch waited its full timeout (30,000 queued points, one
// featurizer: 319 events/s, against 752 with no bound at all). A partition's held
// records are always the next ones it will apply, so its share never holds back
// what its Lookup waits for. At most maxPerEvent records of one event and
// maxRefused refused messages are kept; beyond, they are dropped and counted.
//
// # Waiting
//
// Lookup waits for the records of a batch as long as they keep coming: until none
// has come for its patience (the ingest's featurizer timeout, counted from the call
// and from each record it hands over), so that a slow backbone's featurizers, which
// deliver a large batch's records over many seconds, are waited for rather than
// raced. It waits only for events the featurizers have not passed yet (no record of a
// higher offset of the same partition has come: a featurizer writes a partition's
// records in offset order, so a record behind that front is missing, not late, except
// around a rebalance), and only while featurizers are heard from: no longer than
// Config.Quiet after the last record of the training topic came, applied or not. So a
// primary never waits for records that are not coming: when every featurizer is gone,
// the first batch waits Quiet at most and the next ones not at all, until records flow
// again; a primary ahead of its featurizers waits for them, so that they catch up. A
// featurizer killed while others run stops the records of its partitions until the
// group gives them to another member (the featurizers' session timeout); a batch that
// needs them waits until the others' records are in and the patience has passed, and
// then featurizes them itself.
//
// # Publishing the applied offsets
//
// With Config.Publish set, Run also publishes, every publishEvery while the daemon
// leads, the offset after each training partition's applied one as the committed
// offsets of featrec.AppliedGroup, a consumer group without members
// (stream.Progress). Featurizers skip the events below them, so that the rows the
// primary computed itself after a timeout are not computed again. The offsets only
// save work: a featurizer that cannot read them computes everything, and a record
// for an applied event is dropped as stale.
//
// # Concurrency
//
// Run reads on its own goroutines, one per partition, and publishes on one more (all
// joined before it returns); the readers file under the Source's lock; Lookup may be called
// from another goroutine (the training reader's) at any time, also before Run starts
// or after it ends. A Source is used by one primary: Lookup hands records over.
package featsource
