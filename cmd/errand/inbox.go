package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
)

func (a *app) newInboxCmd() *cobra.Command {
	var (
		session string
		all     bool
		noAck   bool
	)
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "Show a session's notifications: top-level tasks that ended or asked for input",
		Long: `inbox lists the notifications of a session that have not been read, then
acknowledges the ones it printed, so each is shown once. --all shows the read
ones too; --no-ack leaves them unread.`,
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
				if err := printJSON(a.stdout, list); err != nil {
					return err
				}
				return a.ackPrinted(cmd, c, list, noAck)
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
			if err := t.write(a.stdout); err != nil {
				return err
			}
			return a.ackPrinted(cmd, c, list, noAck)
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "session whose inbox to read (default: every session)")
	cmd.Flags().BoolVar(&all, "all", false, "include notifications already read")
	cmd.Flags().BoolVar(&noAck, "no-ack", false, "leave the printed notifications unread")
	return cmd
}

// ackPrinted marks read the unread notifications inbox has just printed,
// and only those: one that arrived since stays unread for next time.
func (a *app) ackPrinted(cmd *cobra.Command, c *apiclient.Client, list *api.NotificationList, noAck bool) error {
	if noAck {
		return nil
	}
	var ids []string
	for _, n := range list.Notifications {
		if n.ReadAt == nil {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := c.AckInbox(cmd.Context(), ids); err != nil {
		return fmt.Errorf("inbox: mark the printed notifications read: %w", err)
	}
	return nil
}
