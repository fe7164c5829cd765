package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
)

// memoryTextWidth bounds the TEXT column of memory lists, and
// memoryReasonWidth the REASON column of list --flagged.
const (
	memoryTextWidth   = 70
	memoryReasonWidth = 48
)

// memoryTimeLayout is how memory show prints times.
const memoryTimeLayout = "2006-01-02 15:04:05Z07:00"

// memoryFilter is the provenance and quarantine flags list and search
// share.
type memoryFilter struct {
	task, agent, source, cursor string
	limit                       int
	flagged                     bool
}

func (f *memoryFilter) register(cmd *cobra.Command, paged bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.task, "task", "", "only memories this task (tsk_…) wrote")
	fl.StringVar(&f.agent, "agent", "", "only memories this agent wrote")
	fl.StringVar(&f.source, "source", "", "only memories of tasks from this source: "+strings.Join(errand.MemorySources, ", "))
	fl.BoolVar(&f.flagged, "flagged", false, "only quarantined memories (flagged as reading like instructions), with the reason")
	fl.IntVar(&f.limit, "limit", 0, "at most this many (1–1000; default 50)")
	if paged {
		fl.StringVar(&f.cursor, "cursor", "", "the page after the one that printed this cursor")
	}
}

func (a *app) newMemoryCmd() *cobra.Command {
	var list memoryFilter
	cmd := &cobra.Command{
		Use:     "memory",
		Aliases: []string{"memories"},
		Short:   "List, search, show, release, remove or purge the memories agents keep",
		Long: `memory lists memories, newest first: what agents stored with remember (and
tasks with the memory result route), with where each came from. search finds
the best matches of a full-text query; show prints one with its category,
subject, confidence and quarantine flag; purge removes everything one task,
agent or source wrote; rm removes one memory.

A memory whose text reads like instructions to a model is quarantined
(flagged) when it is written: recall leaves it out unless a task opts in.
list --flagged shows the quarantined ones with the reason; release ID lets
one back into recall once you have read it (the release is journaled).`,
		Example: `  errand memory list --flagged
  errand memory show mem_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N
  errand memory release mem_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.listMemories(cmd, &list, "") },
	}
	list.register(cmd, true)

	var listSub, search memoryFilter
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List memories, newest first",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return a.listMemories(cmd, &listSub, "") },
	}
	listSub.register(listCmd, true)
	searchCmd := &cobra.Command{
		Use:   "search QUERY...",
		Short: "Find the memories that best match the words of QUERY",
		Long: `search looks the words of QUERY up in the memories' text and tags and lists
the best matches first. Every character is plain text: quotes, AND, * and the
like have no special meaning.`,
		Example: `  errand memory search staging database
  errand memory search deploy --source heartbeat --limit 5`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.listMemories(cmd, &search, strings.Join(args, " "))
		},
	}
	search.register(searchCmd, false)
	cmd.AddCommand(listCmd, searchCmd, a.newMemoryShowCmd(), a.newMemoryReleaseCmd(), a.newMemoryRmCmd(), a.newMemoryPurgeCmd())
	return cmd
}

func (a *app) listMemories(cmd *cobra.Command, f *memoryFilter, query string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	p := &apiclient.ListMemoriesParams{
		TaskID: f.task, Agent: f.agent, Source: f.source, Query: query, Limit: f.limit, Cursor: f.cursor,
	}
	if f.flagged {
		p.Flagged = new(true)
	}
	list, err := c.ListMemories(cmd.Context(), p)
	if err != nil {
		if query != "" {
			return fmt.Errorf("search memories: %w", err)
		}
		return fmt.Errorf("list memories: %w", err)
	}
	empty := "no memories"
	switch {
	case query != "" && f.flagged:
		empty = "no quarantined memory matches " + fmt.Sprintf("%q", query)
	case query != "":
		empty = "no memory matches " + fmt.Sprintf("%q", query)
	case f.flagged:
		empty = "no quarantined memories"
	}
	if done, err := a.printListStart(list, len(list.Memories), empty); done {
		return err
	}
	color, now := a.color(), a.now()
	h := func(s string) string { return style(color, ansiBold, s) }
	t := &table{}
	if f.flagged {
		t.row(h("ID"), h("AGE"), h("SOURCE"), h("TASK"), h("BY"), h("REASON"), h("TEXT"))
	} else {
		t.row(h("ID"), h("AGE"), h("SOURCE"), h("TASK"), h("TOKENS"), h("TEXT"))
	}
	for _, m := range list.Memories {
		task := "-"
		if m.TaskID != nil {
			task = *m.TaskID
		}
		text := m.Text
		if len(m.Tags) > 0 {
			text += " [" + strings.Join(m.Tags, ", ") + "]"
		}
		switch {
		case f.flagged && m.Flagged != nil:
			t.row(m.ID, age(now, m.CreatedAt), m.Source, task, m.Flagged.By, truncate(m.Flagged.Reason, memoryReasonWidth),
				truncate(text, memoryTextWidth))
		case f.flagged:
			t.row(m.ID, age(now, m.CreatedAt), m.Source, task, "-", "-", truncate(text, memoryTextWidth))
		default:
			if m.Flagged != nil {
				text = "(quarantined) " + text
			}
			t.row(m.ID, age(now, m.CreatedAt), m.Source, task, fmt.Sprint(m.EstimatedTokens), truncate(text, memoryTextWidth))
		}
	}
	if err := t.write(a.stdout); err != nil {
		return err
	}
	if list.NextCursor != "" {
		more := "errand memory list --cursor " + list.NextCursor
		if f.flagged {
			more = "errand memory list --flagged --cursor " + list.NextCursor
		}
		_, err = fmt.Fprintf(a.stdout, "more: %s\n", more)
	}
	return err
}

func (a *app) newMemoryShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show ID",
		Example: "  errand memory show mem_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N",
		Short:   "Show one memory in full, with its provenance",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			m, err := c.GetMemory(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("show %s: %w", args[0], err)
			}
			if a.asJSON {
				return printJSON(a.stdout, m)
			}
			task, agent := "-", "-"
			if m.TaskID != nil {
				task = *m.TaskID
			}
			if m.Agent != nil {
				agent = *m.Agent
			}
			tags := "-"
			if len(m.Tags) > 0 {
				tags = strings.Join(m.Tags, ", ")
			}
			subject, refreshed, flagged := "-", "never", "no"
			if m.Subject != nil {
				subject = *m.Subject
			}
			if m.RefreshedAt != nil {
				refreshed = m.RefreshedAt.Format(memoryTimeLayout)
			}
			if fl := m.Flagged; fl != nil {
				flagged = fmt.Sprintf("%s  by: %s  at: %s", fl.Reason, fl.By, fl.At.Format(memoryTimeLayout))
			}
			_, err = fmt.Fprintf(a.stdout, "%s\nsource: %s  task: %s  agent: %s  tokens: %d  created: %s\n"+
				"category: %s  subject: %s  confidence: %.2f  refreshed: %s\nflagged: %s\ntags: %s\n\n%s\n",
				m.ID, m.Source, task, agent, m.EstimatedTokens, m.CreatedAt.Format(memoryTimeLayout),
				m.Category, subject, m.Confidence, refreshed, flagged, tags, m.Text)
			return err
		},
	}
}

func (a *app) newMemoryReleaseCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "release ID",
		Example: "  errand memory list --flagged\n  errand memory release mem_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N",
		Short:   "Release a quarantined memory: recall finds it again",
		Long: `release lifts the quarantine of one memory: recall returns it again, as
it returns any other memory. Read it first (errand memory show ID); the
release is journaled (memory.released) with who released it. Releasing a
memory that is not quarantined changes nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			// Read it first, to say what the release lifted.
			before, err := c.GetMemory(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("release %s: %w", args[0], err)
			}
			m, err := c.ReleaseMemory(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("release %s: %w", args[0], err)
			}
			if a.asJSON {
				return printJSON(a.stdout, m)
			}
			if before.Flagged == nil {
				_, err = fmt.Fprintf(a.stdout, "%s was not quarantined; nothing to release\n", m.ID)
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "released %s (flagged by %s: %s)\n  %s\n",
				m.ID, before.Flagged.By, before.Flagged.Reason, truncate(m.Text, memoryTextWidth))
			return err
		},
	}
}

func (a *app) newMemoryRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID",
		Example: "  errand memory rm mem_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N",
		Aliases: []string{"remove", "delete"},
		Short:   "Remove one memory",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteMemory(cmd.Context(), args[0]); err != nil {
				return fmt.Errorf("rm %s: %w", args[0], err)
			}
			if a.asJSON {
				return printJSON(a.stdout, map[string]string{"removed": args[0]})
			}
			_, err = fmt.Fprintf(a.stdout, "removed %s\n", args[0])
			return err
		},
	}
}

func (a *app) newMemoryPurgeCmd() *cobra.Command {
	var body api.PurgeMemories
	cmd := &cobra.Command{
		Use:   "purge --task ID | --agent NAME | --source SOURCE",
		Short: "Remove every memory one task, agent or source wrote",
		Long: `purge removes, for good, every memory the task (and only that task), the agent
or the tasks of the source wrote. Give exactly one of --task, --agent and
--source.`,
		Example: `  errand memory purge --task tsk_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N
  errand memory purge --source heartbeat`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			given := 0
			for _, v := range []string{body.TaskID, body.Agent, body.Source} {
				if v != "" {
					given++
				}
			}
			if given != 1 {
				return errors.New("give exactly one of --task, --agent and --source")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			n, err := c.PurgeMemories(cmd.Context(), &body)
			if err != nil {
				return fmt.Errorf("purge memories: %w", err)
			}
			if a.asJSON {
				return printJSON(a.stdout, api.PurgeResult{Purged: n})
			}
			noun := "memories"
			if n == 1 {
				noun = "memory"
			}
			_, err = fmt.Fprintf(a.stdout, "purged %d %s\n", n, noun)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&body.TaskID, "task", "", "the task (tsk_…) whose memories go")
	f.StringVar(&body.Agent, "agent", "", "the agent whose memories go")
	f.StringVar(&body.Source, "source", "", "the source whose memories go: "+strings.Join(errand.MemorySources, ", "))
	return cmd
}
