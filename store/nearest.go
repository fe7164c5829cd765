package store

import (
	"container/heap"
	"time"
)

// NearestCandidate is a memory a MemoryNearest scan found: its id, when it
// was written, and its vector's similarity to the query's.
type NearestCandidate struct {
	ID         string
	CreatedAt  time.Time
	Similarity float64
}

// worse orders candidates: less similar, then older, then the lower id.
func (c NearestCandidate) worse(o NearestCandidate) bool {
	if c.Similarity != o.Similarity {
		return c.Similarity < o.Similarity
	}
	if !c.CreatedAt.Equal(o.CreatedAt) {
		return c.CreatedAt.Before(o.CreatedAt)
	}
	return c.ID < o.ID
}

// NearestTop keeps the best candidates a scan offers, at most its limit,
// in memory that does not grow with the scan.
type NearestTop struct {
	h nearestHeap
}

// NewNearestTop keeps the best limit (at least 1) candidates.
func NewNearestTop(limit int) *NearestTop {
	return &NearestTop{h: nearestHeap{limit: max(limit, 1)}}
}

// Offer keeps c if it is among the best so far.
func (t *NearestTop) Offer(c NearestCandidate) {
	h := &t.h
	switch {
	case len(h.items) < h.limit:
		heap.Push(h, c)
	case h.items[0].worse(c):
		h.items[0] = c
		heap.Fix(h, 0)
	}
}

// Best empties it and returns what it kept, the best first.
func (t *NearestTop) Best() []NearestCandidate {
	out := make([]NearestCandidate, len(t.h.items))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&t.h).(NearestCandidate)
	}
	return out
}

// nearestHeap has the worst kept candidate at its root.
type nearestHeap struct {
	limit int
	items []NearestCandidate
}

func (h *nearestHeap) Len() int           { return len(h.items) }
func (h *nearestHeap) Less(i, j int) bool { return h.items[i].worse(h.items[j]) }
func (h *nearestHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *nearestHeap) Push(x any)         { h.items = append(h.items, x.(NearestCandidate)) }
func (h *nearestHeap) Pop() any {
	c := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return c
}

// PairNearest pairs the best candidates with their memories, in the
// candidates' order; one deleted since the scan is left out.
func PairNearest(best []NearestCandidate, ms []*Memory) []*MemoryNearest {
	byID := make(map[string]*Memory, len(ms))
	for _, m := range ms {
		byID[m.ID] = m
	}
	out := make([]*MemoryNearest, 0, len(best))
	for _, c := range best {
		if m := byID[c.ID]; m != nil {
			out = append(out, &MemoryNearest{Memory: m, Similarity: c.Similarity})
		}
	}
	return out
}

// FindNearest answers a MemoryNearest search: it keeps the best p.Limit of
// the vectors scan offers, by similarity to p.Vector, then reads those
// memories with read. A search without a vector finds nothing. scan offers
// each candidate's id, when it was written and its encoded vector, which
// need stay valid only during the call.
func FindNearest(p *MemoryNearestParams, scan func(offer func(id string, createdAt time.Time, vec []byte)) error,
	read func(ids []string) ([]*Memory, error),
) ([]*MemoryNearest, error) {
	if len(p.Vector) == 0 {
		return nil, nil
	}
	top := NewNearestTop(p.Limit)
	err := scan(func(id string, createdAt time.Time, vec []byte) {
		if sim, ok := DotEncoded(p.Vector, vec); ok {
			top.Offer(NearestCandidate{ID: id, CreatedAt: createdAt, Similarity: sim})
		}
	})
	if err != nil {
		return nil, err
	}
	best := top.Best()
	if len(best) == 0 {
		return nil, nil
	}
	ids := make([]string, len(best))
	for i, c := range best {
		ids[i] = c.ID
	}
	ms, err := read(ids)
	if err != nil {
		return nil, err
	}
	return PairNearest(best, ms), nil
}
