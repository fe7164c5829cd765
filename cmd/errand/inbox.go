package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) newInboxCmd() *cobra.Command {
	var (
		session string
		all     bool
	)
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "Show a session's notifications: top-level tasks that ended or asked for input",
		Long: `inbox lists the notifications of a session that have not been read, and the
daemon marks them read: each is shown once. --all shows the read ones too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.Inbox(cmd.Context(), session, all)
			if err != nil {
				return fmt.Errorf("inbox: %w", err)
			}
			if a.asJSON {
				return printJSON(a.stdout, list)
			}
			if len(list.Notifications) == 0 {
				msg := "no new notifications"
				if all {
					msg = "no notifications"
				}
				_, err := fmt.Fprintln(a.stdout, msg)
				return err
			}
			color, now := a.color(), a.now()
			h := func(s string) string { return style(color, ansiBold, s) }
			t := &table{}
			if session == "" {
				t.row(h("AGE"), h("SESSION"), h("TASK"), h("EVENT"), h("TEXT"))
			} else {
				t.row(h("AGE"), h("TASK"), h("EVENT"), h("TEXT"))
			}
			for _, n := range list.Notifications {
				text := truncate(n.Text, 80)
				if n.ReadAt == nil && all {
					text = style(color, ansiBold, text)
				}
				if session == "" {
					t.row(age(now, n.CreatedAt), cmpStr(n.SessionID, "-"), n.TaskID, n.EventType, text)
				} else {
					t.row(age(now, n.CreatedAt), n.TaskID, n.EventType, text)
				}
			}
			return t.write(a.stdout)
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "session whose inbox to read (default: every session)")
	cmd.Flags().BoolVar(&all, "all", false, "include notifications already read")
	return cmd
}
