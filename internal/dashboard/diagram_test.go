package dashboard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

func diagramTask(n int, parent string) *errand.Task {
	return &errand.Task{ID: fmt.Sprintf("tsk_%026d", n), ParentID: parent, Title: fmt.Sprintf("task %d", n), Status: errand.StatusPending}
}

type placed struct{ x, y int }

func positions(d *diagram) map[string]placed {
	at := map[string]placed{}
	for _, n := range d.Nodes {
		at[n.Task.ID] = placed{n.X, n.Y}
	}
	return at
}

func TestTreeDiagramIndentsChildrenUnderTheirParents(t *testing.T) {
	root := diagramTask(1, "")
	first := diagramTask(2, root.ID)
	second := diagramTask(3, root.ID)
	grandchild := diagramTask(4, first.ID)
	orphan := diagramTask(5, diagramTask(99, "").ID) // its parent is not in the list

	d := treeDiagram([]*errand.Task{orphan, grandchild, second, first, root}, first.ID)
	row := boxHeight + rowGap
	require.Equal(t, map[string]placed{
		root.ID:       {0, 0},
		first.ID:      {treeIndent, row},
		grandchild.ID: {2 * treeIndent, 2 * row},
		second.ID:     {treeIndent, 3 * row},
		orphan.ID:     {0, 4 * row},
	}, positions(d), "depth first, siblings oldest first")
	require.Len(t, d.Edges, 3, "one line from each parent to each child")
	require.Equal(t, fmt.Sprintf("M%d %d V%d H%d", treeIndent/2, boxHeight, row+boxHeight/2, treeIndent), d.Edges[0].Path)
	require.Equal(t, 2*treeIndent+boxWidth, d.Width)
	require.Equal(t, 4*row+boxHeight, d.Height)
	require.False(t, d.Partial)
	for _, n := range d.Nodes {
		require.Equal(t, n.Task.ID == first.ID, n.Current, n.Task.ID)
	}
}

func TestTreeDiagramDrawsAtMostItsLimit(t *testing.T) {
	tasks := []*errand.Task{diagramTask(0, "")}
	for i := 1; i <= maxDiagramTasks+5; i++ {
		tasks = append(tasks, diagramTask(i, tasks[0].ID))
	}
	d := treeDiagram(tasks, "")
	require.Len(t, d.Nodes, maxDiagramTasks)
	require.Len(t, d.Edges, maxDiagramTasks-1)
	require.True(t, d.Partial)
}

func TestGraphDiagramPutsEveryTaskRightOfWhatItDependsOn(t *testing.T) {
	// a → b → d, a → c → d, a → d, and e related to c.
	var tasks []*errand.Task
	for i := range 5 {
		tasks = append(tasks, diagramTask(i, ""))
	}
	a, b, c, dd, e := tasks[0], tasks[1], tasks[2], tasks[3], tasks[4]
	edge := func(from, to *errand.Task, kind string) *errand.Dependency {
		return &errand.Dependency{TaskID: to.ID, DependsOnID: from.ID, Kind: kind}
	}
	g := &errand.DependencyGraph{Tasks: []*errand.Task{dd, c, e, b, a}, Edges: []*errand.Dependency{
		edge(a, b, "blocks"), edge(b, dd, "blocks"), edge(a, c, "blocks"), edge(c, dd, "blocks"), edge(a, dd, "blocks"),
		edge(c, e, "related"),
	}}
	d := graphDiagram(g, c.ID)
	at := positions(d)
	layer := func(t *errand.Task) int { return at[t.ID].x / (boxWidth + layerGap) }
	require.Equal(t, 0, layer(a))
	require.Equal(t, 1, layer(b))
	require.Equal(t, 1, layer(c))
	require.Equal(t, 2, layer(dd), "the longest path decides the layer")
	require.Equal(t, 2, layer(e))
	require.Len(t, d.Edges, 6)
	for i, ed := range d.Edges {
		var x1, y1, cx1, cy1, cx2, cy2, x2, y2 int
		_, err := fmt.Sscanf(ed.Path, "M%d %d C%d %d %d %d %d %d", &x1, &y1, &cx1, &cy1, &cx2, &cy2, &x2, &y2)
		require.NoError(t, err, ed.Path)
		require.Less(t, x1, x2, "edge %d points right", i)
	}
	require.Equal(t, "related", d.Edges[5].Kind)
	require.Equal(t, 3*boxWidth+2*layerGap, d.Width)
	require.False(t, d.Partial)

	g.Truncated = true
	require.True(t, graphDiagram(g, "").Partial)
}

func TestGraphDiagramSurvivesEdgesToTasksItDoesNotHave(t *testing.T) {
	a, b := diagramTask(1, ""), diagramTask(2, "")
	g := &errand.DependencyGraph{Tasks: []*errand.Task{a}, Edges: []*errand.Dependency{{TaskID: a.ID, DependsOnID: b.ID, Kind: "blocks"}}}
	d := graphDiagram(g, a.ID)
	require.Len(t, d.Nodes, 1)
	require.Empty(t, d.Edges)
}

func TestCutKeepsWholeRunes(t *testing.T) {
	require.Equal(t, "short", cut("short", 10))
	require.Equal(t, "ééé…", cut("éééééé", 4))
}
