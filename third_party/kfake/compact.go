package kfake

// This file is cairn's change to kfake (see CAIRN.md): compaction rewrites only the
// segments that lose a record, instead of every segment of every compacted partition.

import (
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// compact removes superseded records from a compactable partition.
// The last batch is treated as the active segment and is never compacted.
//
// Which records survive is as upstream: of each key the newest record, a
// tombstone only for delete.retention.ms, a control batch only while its
// producer has data left. Only a segment that loses a batch or a record is
// rewritten: its survivors go to temporary files, synced, renamed over the
// segment's files (named after its new first offset) and the directory is
// synced; a segment left empty is removed. A partition whose segments all
// keep their records writes nothing, so erasing one key rewrites the
// segments that hold it, not the partition, nor the topic.
//
// The reads are two passes over the cleanable batches (the key index, then
// which segments change) and a third over the segments that change.
func (c *Cluster) compact(pd *partData, topic string) {
	if !pd.hasNBatches(2) { // need at least 2 batches: compaction keeps the last batch unconditionally
		return
	}
	total := pd.totalBatches()

	deleteRetentionMs := int64(86400000)
	if tcfg, ok := c.data.tcfgs[topic]; ok {
		if v, ok := tcfg["delete.retention.ms"]; ok && v != nil {
			if n, err := strconv.ParseInt(*v, 10, 64); err == nil {
				deleteRetentionMs = n
			}
		}
	}
	now := time.Now().UnixMilli()
	cleanableEnd := total - 1

	// Pass 1: key => highest offset.
	keyOffsets := make(map[string]int64)
	n := 0
	ok := true
	pd.eachBatchMeta(func(si, _ int, m *batchMeta) bool {
		if n >= cleanableEnd {
			return false
		}
		n++
		batch, err := c.readBatchFull(pd, si, m)
		if err != nil {
			c.cfg.logger.Logf(LogLevelWarn, "compact %s-%d: read batch pass 1: %v", pd.t, pd.p, err)
			ok = false
			return false
		}
		if batch.Attributes&0x0020 != 0 || pd.isBatchAborted(batch) {
			return true
		}
		_ = forEachBatchRecord(batch.RecordBatch, func(rec kmsg.Record) bool {
			if rec.Key == nil {
				return true
			}
			absOffset := batch.FirstOffset + int64(rec.OffsetDelta)
			k := string(rec.Key)
			if prev, exists := keyOffsets[k]; !exists || absOffset > prev {
				keyOffsets[k] = absOffset
			}
			return true
		})
		return true
	})
	if !ok {
		return
	}

	// survivors filters a data batch: nil if nothing survives, the batch
	// itself if everything does.
	survivors := func(batch *partBatch) *partBatch {
		var surviving []kmsg.Record
		_ = forEachBatchRecord(batch.RecordBatch, func(rec kmsg.Record) bool {
			absOffset := batch.FirstOffset + int64(rec.OffsetDelta)
			if rec.Key == nil {
				return true
			}
			if keyOffsets[string(rec.Key)] > absOffset {
				return true // superseded
			}
			if rec.Value == nil && now-(batch.FirstTimestamp+int64(rec.TimestampDelta)) >= deleteRetentionMs {
				return true // expired tombstone
			}
			surviving = append(surviving, rec)
			return true
		})
		switch {
		case len(surviving) == 0:
			return nil
		case len(surviving) == int(batch.NumRecords):
			return batch
		default:
			return rebuildBatch(batch, surviving)
		}
	}

	// Pass 2: which segments change, and which producers keep data.
	survivingPIDs := make(map[int64]bool)
	dirty := make([]bool, len(pd.segments))
	controls := make([][]int64, len(pd.segments))
	n = 0
	pd.eachBatchMeta(func(si, _ int, m *batchMeta) bool {
		if n >= cleanableEnd {
			return false
		}
		n++
		batch, err := c.readBatchFull(pd, si, m)
		if err != nil {
			c.cfg.logger.Logf(LogLevelWarn, "compact %s-%d: read batch pass 2: %v", pd.t, pd.p, err)
			ok = false
			return false
		}
		if batch.Attributes&0x0020 != 0 {
			controls[si] = append(controls[si], batch.ProducerID)
			return true
		}
		if pd.isBatchAborted(batch) {
			dirty[si] = true
			return true
		}
		kept := survivors(batch)
		if kept != nil {
			survivingPIDs[batch.ProducerID] = true
		}
		if kept != batch {
			dirty[si] = true
		}
		return true
	})
	if !ok {
		return
	}
	for si, pids := range controls {
		for _, pid := range pids {
			if !survivingPIDs[pid] {
				dirty[si] = true
			}
		}
	}

	// Pass 3: rewrite the segments that change.
	changed := false
	var segments []segmentInfo
	n = 0
	for si := range pd.segments {
		seg := &pd.segments[si]
		if !dirty[si] {
			n += len(seg.index)
			segments = append(segments, *seg)
			continue
		}
		var kept []*partBatch
		for mi := range seg.index {
			last := n == cleanableEnd
			n++
			batch, err := c.readBatchFull(pd, si, &seg.index[mi])
			if err != nil {
				c.cfg.logger.Logf(LogLevelWarn, "compact %s-%d: read batch pass 3: %v", pd.t, pd.p, err)
				ok = false
				break
			}
			switch {
			case last:
			case batch.Attributes&0x0020 != 0:
				if !survivingPIDs[batch.ProducerID] {
					continue
				}
			case pd.isBatchAborted(batch):
				continue
			default:
				if batch = survivors(batch); batch == nil {
					continue
				}
			}
			kept = append(kept, batch)
		}
		if !ok {
			// Keep what is rewritten so far and this segment as it is.
			segments = append(segments, pd.segments[si:]...)
			break
		}
		rewritten, err := c.rewriteSegment(pd, si, kept)
		if err != nil {
			c.cfg.logger.Logf(LogLevelWarn, "compact %s-%d: rewrite segment %d: %v", pd.t, pd.p, seg.base, err)
			segments = append(segments, pd.segments[si:]...)
			break
		}
		changed = true
		segments = append(segments, rewritten...)
	}
	if !changed {
		return
	}
	pd.segments = segments
	pd.nbytes = 0
	pd.eachBatchMeta(func(_, _ int, m *batchMeta) bool {
		pd.nbytes += int64(m.nbytes)
		return true
	})
	if len(pd.segments) > 0 && len(pd.segments[0].index) > 0 {
		pd.logStartOffset = pd.segments[0].index[0].firstOffset
	}
	pd.rebuildMaxTimestampMeta()
	pd.trimAbortedTxns()
}

// rewriteSegment replaces segment si's files by ones that hold kept, the
// batches of the segment that survive (in order), and returns the segments
// that replace it: none when kept is empty (the files are removed), more than
// one when kept is larger than segment.bytes (a segment written before
// segment.bytes was lowered is split, so the next compaction of it rewrites
// less). New files are written under temporary names, synced and renamed into
// place, then the directory is synced, so a crash leaves each file whole.
func (c *Cluster) rewriteSegment(pd *partData, si int, kept []*partBatch) ([]segmentInfo, error) {
	pdir := partDir(c.storageDir, pd.t, pd.p)
	old := pd.segments[si]
	if si == len(pd.segments)-1 {
		pd.closeActiveFiles(true)
	}
	if old.readFile != nil {
		old.readFile.Close()
		pd.segments[si].readFile = nil
	}
	oldSeg, oldIdx := filepath.Join(pdir, segmentFileName(old.base)), filepath.Join(pdir, indexFileName(old.base))
	var groups [][]*partBatch
	var size int64
	for _, b := range kept {
		if len(groups) == 0 || size >= c.segmentBytes(pd.t) {
			groups, size = append(groups, nil), 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], b)
		size += int64(b.nbytes)
	}
	var out []segmentInfo
	keepOld := false
	for gi, g := range groups {
		seg, err := c.writeSegment(pdir, g)
		if err != nil {
			// Drop the new segments beside the old one, which stays.
			for _, o := range out {
				if o.base != old.base {
					c.fs.Remove(filepath.Join(pdir, segmentFileName(o.base)))
					c.fs.Remove(filepath.Join(pdir, indexFileName(o.base)))
				}
			}
			return nil, err
		}
		seg.endOff = old.endOff
		if gi+1 < len(groups) {
			seg.endOff = groups[gi+1][0].FirstOffset
		}
		keepOld = keepOld || seg.base == old.base
		out = append(out, seg)
	}
	if !keepOld {
		if err := c.fs.Remove(oldSeg); err != nil {
			return nil, err
		}
		c.fs.Remove(oldIdx)
	}
	c.syncDir(pdir)
	return out, nil
}

// writeSegment writes batches as the segment named after the first one's offset,
// through synced temporary files renamed into place.
func (c *Cluster) writeSegment(pdir string, batches []*partBatch) (segmentInfo, error) {
	seg := segmentInfo{base: batches[0].FirstOffset, lastModified: time.Now().UnixMilli()}
	segPath, idxPath := filepath.Join(pdir, segmentFileName(seg.base)), filepath.Join(pdir, indexFileName(seg.base))
	sf, err := c.fs.OpenFile(segPath+".compact", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return seg, err
	}
	defer sf.Close()
	xf, err := c.fs.OpenFile(idxPath+".compact", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return seg, err
	}
	defer xf.Close()
	var pos int64
	for _, b := range batches {
		bp := encodeBatch(b)
		meta := b.meta(pos)
		_, err := sf.Write(*bp)
		size := int64(len(*bp))
		*bp = (*bp)[:0]
		batchPool.Put(bp)
		if err != nil {
			return seg, err
		}
		idx := encodeIndexEntry(b.epoch, b.maxEarlierTimestamp, b.inTx)
		if _, err := xf.Write(idx[:]); err != nil {
			return seg, err
		}
		seg.index = append(seg.index, meta)
		seg.updateEpochRange(b.epoch)
		seg.updateMaxBatch(meta, pos == 0)
		pos += size
		seg.size += size
	}
	for _, f := range []file{sf, xf} {
		if err := f.Sync(); err != nil {
			return seg, err
		}
	}
	if err := c.fs.Rename(segPath+".compact", segPath); err != nil {
		return seg, err
	}
	return seg, c.fs.Rename(idxPath+".compact", idxPath)
}

// syncDir fsyncs a directory of the data directory, so that renames and removals
// in it are durable; without a data directory there is nothing to sync.
func (c *Cluster) syncDir(dir string) {
	if !c.persist() {
		return
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
