package dashboard

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/errandhq/errand"
)

// A diagram is a task tree or dependency graph laid out for SVG: boxes
// for tasks, paths between them. Layout happens here so the template only
// draws.
type diagram struct {
	Width, Height       int
	BoxWidth, BoxHeight int
	Nodes               []diagramNode
	Edges               []diagramEdge
	// Partial is set when tasks were left out to keep the drawing
	// readable.
	Partial bool
}

type diagramNode struct {
	X, Y    int
	Task    *errand.Task
	Label   string // the title, cut to fit the box
	Current bool   // the task whose page this is
}

type diagramEdge struct {
	Path string // SVG path data
	Kind string // a dependency kind; empty in a tree
}

// Box sizes and gaps, in SVG user units (CSS pixels).
const (
	boxWidth   = 216
	boxHeight  = 40
	rowGap     = 10
	treeIndent = 28
	layerGap   = 56
	labelRunes = 30
)

// maxDiagramTasks bounds what one drawing shows.
const maxDiagramTasks = 200

func newDiagram() *diagram { return &diagram{BoxWidth: boxWidth, BoxHeight: boxHeight} }

func newNode(t *errand.Task, x, y int, current string) diagramNode {
	return diagramNode{X: x, Y: y, Task: t, Label: cut(taskTitle(t), labelRunes), Current: t.ID == current}
}

// cut shortens s to at most n runes, marking the cut.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// treeDiagram lays out the tasks of one run as an indented tree, parents
// above their children, siblings oldest first. A task whose parent is not
// among tasks is a root.
func treeDiagram(tasks []*errand.Task, current string) *diagram {
	byID := make(map[string]*errand.Task, len(tasks))
	for _, t := range tasks {
		byID[t.ID] = t
	}
	children := map[string][]*errand.Task{}
	var roots []*errand.Task
	for _, t := range tasks {
		if _, ok := byID[t.ParentID]; ok && t.ParentID != t.ID {
			children[t.ParentID] = append(children[t.ParentID], t)
		} else {
			roots = append(roots, t)
		}
	}
	byAge := func(a, b *errand.Task) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(roots, byAge)
	for _, c := range children {
		slices.SortFunc(c, byAge)
	}

	d := newDiagram()
	var walk func(t *errand.Task, depth int, parent *diagramNode)
	walk = func(t *errand.Task, depth int, parent *diagramNode) {
		if len(d.Nodes) == maxDiagramTasks {
			d.Partial = true
			return
		}
		n := newNode(t, depth*treeIndent, len(d.Nodes)*(boxHeight+rowGap), current)
		d.Nodes = append(d.Nodes, n)
		if parent != nil {
			// Down from the parent's left edge, then across to the child.
			d.Edges = append(d.Edges, diagramEdge{Path: fmt.Sprintf("M%d %d V%d H%d",
				parent.X+treeIndent/2, parent.Y+boxHeight, n.Y+boxHeight/2, n.X)})
		}
		for _, c := range children[t.ID] {
			walk(c, depth+1, &n)
		}
	}
	for _, r := range roots {
		walk(r, 0, nil)
	}
	for _, n := range d.Nodes {
		d.Width = max(d.Width, n.X+boxWidth)
		d.Height = max(d.Height, n.Y+boxHeight)
	}
	return d
}

// graphDiagram lays out a dependency graph in layers, left to right: each
// task one layer right of the furthest task it depends on, so every edge
// points right. Within a layer tasks sit near those they depend on.
func graphDiagram(g *errand.DependencyGraph, current string) *diagram {
	ids := make([]string, len(g.Tasks))
	byID := make(map[string]*errand.Task, len(g.Tasks))
	for i, t := range g.Tasks {
		ids[i] = t.ID
		byID[t.ID] = t
	}
	slices.Sort(ids)
	blockers := map[string][]string{}
	dependents := map[string][]string{}
	for _, e := range g.Edges {
		if byID[e.TaskID] == nil || byID[e.DependsOnID] == nil {
			continue
		}
		blockers[e.TaskID] = append(blockers[e.TaskID], e.DependsOnID)
		dependents[e.DependsOnID] = append(dependents[e.DependsOnID], e.TaskID)
	}

	// Longest path from a task with no blockers, in topological order.
	layer := make(map[string]int, len(ids))
	waiting := make(map[string]int, len(ids))
	var ready []string
	for _, id := range ids {
		waiting[id] = len(blockers[id])
		if waiting[id] == 0 {
			ready = append(ready, id)
		}
	}
	// The store refuses cycles; a task on one would stay in layer 0.
	for len(ready) > 0 {
		id := ready[0]
		ready = ready[1:]
		for _, next := range dependents[id] {
			layer[next] = max(layer[next], layer[id]+1)
			if waiting[next]--; waiting[next] == 0 {
				ready = append(ready, next)
			}
		}
	}

	var layers [][]string
	for _, id := range ids {
		l := layer[id]
		for len(layers) <= l {
			layers = append(layers, nil)
		}
		layers[l] = append(layers[l], id)
	}
	row := map[string]int{}
	for l, tasks := range layers {
		// Order by the mean row of the blockers already placed.
		mean := func(id string) float64 {
			sum, n := 0, 0
			for _, b := range blockers[id] {
				if layer[b] < l {
					sum += row[b]
					n++
				}
			}
			if n == 0 {
				return -1
			}
			return float64(sum) / float64(n)
		}
		slices.SortStableFunc(tasks, func(a, b string) int { return cmp.Compare(mean(a), mean(b)) })
		for i, id := range tasks {
			row[id] = i
		}
	}

	d := newDiagram()
	at := map[string]diagramNode{}
	for l, tasks := range layers {
		for i, id := range tasks {
			n := newNode(byID[id], l*(boxWidth+layerGap), i*(boxHeight+rowGap), current)
			at[id] = n
			d.Nodes = append(d.Nodes, n)
			d.Width = max(d.Width, n.X+boxWidth)
			d.Height = max(d.Height, n.Y+boxHeight)
		}
	}
	for _, e := range g.Edges {
		from, ok1 := at[e.DependsOnID]
		to, ok2 := at[e.TaskID]
		if !ok1 || !ok2 {
			continue
		}
		x1, y1 := from.X+boxWidth, from.Y+boxHeight/2
		x2, y2 := to.X-6, to.Y+boxHeight/2 // short of the box: room for the arrow head
		d.Edges = append(d.Edges, diagramEdge{Kind: e.Kind, Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d",
			x1, y1, x1+layerGap/2, y1, x2-layerGap/2, y2, x2, y2)})
	}
	d.Partial = g.Truncated
	return d
}
