package store

import "slices"

// Room is what a claim may still take under concurrency limits (see
// TaskLeaseManyParams.Limits): per limited key, its limit less the tasks
// running or taken so far. Drivers fill it from their counts and ask it
// about each ready task in claim order.
type Room struct {
	keys   map[string]int // concurrency key → room left
	agents map[string]int // agent → room left
}

// NewRoom starts from limits with nothing running.
func NewRoom(limits map[string]int) *Room {
	r := &Room{keys: map[string]int{}, agents: map[string]int{}}
	for key, n := range limits {
		if agent, ok := KeyAgent(key); ok {
			r.agents[agent] = n
		} else {
			r.keys[key] = n
		}
	}
	return r
}

// Keys lists the limited concurrency keys and agents, sorted.
func (r *Room) Keys() (keys, agents []string) {
	return sortedNames(r.keys), sortedNames(r.agents)
}

// RunningKey and RunningAgent count n tasks running under a key or agent.
func (r *Room) RunningKey(key string, n int)     { r.keys[key] -= n }
func (r *Room) RunningAgent(agent string, n int) { r.agents[agent] -= n }

// Take reports whether a task with concurrency key key ("" for none) of
// agent fits, and if so counts it.
func (r *Room) Take(key, agent string) bool {
	kn, keyLimited := r.keys[key]
	an, agentLimited := r.agents[agent]
	if keyLimited && key != "" && kn <= 0 || agentLimited && an <= 0 {
		return false
	}
	if keyLimited && key != "" {
		r.keys[key]--
	}
	if agentLimited {
		r.agents[agent]--
	}
	return true
}

// Full lists the keys and agents with no room left, sorted: a claim
// leaves their tasks out.
func (r *Room) Full() (keys, agents []string) {
	return fullNames(r.keys), fullNames(r.agents)
}

func sortedNames(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func fullNames(m map[string]int) []string {
	out := []string{}
	for k, n := range m {
		if n <= 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// FillRoom runs the rounds of a claim held to concurrency limits and
// returns the ids taken, in claim order, at most limit. Each round, next
// lists up to want ready tasks in claim order, leaving out those of the
// full keys and agents and those already taken, and visits each with its
// keys; FillRoom takes those that fit. A key that fills up mid-round is
// left out of the next round, so tasks behind it are still reached; each
// round fills the claim, runs out of tasks or fills a key, so it ends.
func FillRoom[ID any](room *Room, limit int, next func(fullKeys, fullAgents []string, taken []ID, want int, visit func(id ID, key, agent string)) error) ([]ID, error) {
	var taken []ID
	for len(taken) < limit {
		want := limit - len(taken)
		fullKeys, fullAgents := room.Full()
		fetched, skipped := 0, 0
		err := next(fullKeys, fullAgents, taken, want, func(id ID, key, agent string) {
			fetched++
			if !room.Take(key, agent) {
				skipped++
				return
			}
			taken = append(taken, id)
		})
		if err != nil {
			return nil, err
		}
		if fetched < want || skipped == 0 {
			break // no more ready tasks, or every one fit
		}
	}
	return taken, nil
}
