package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

const pushConfigColumns = `task_id, id, url, token, auth_scheme, auth_credentials, protocol_version, created_at, updated_at`

func scanPushConfig(r rowScanner) (*store.PushConfig, error) {
	var (
		c                  store.PushConfig
		created, updatedAt int64
	)
	if err := r.Scan(&c.TaskID, &c.ID, &c.URL, &c.Token, &c.AuthScheme, &c.AuthCredentials, &c.ProtocolVersion, &created, &updatedAt); err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updatedAt)
	return &c, nil
}

var _ store.PushConfigWriter = execTx{}

// PushConfigUpsert implements store.PushConfigWriter. The task's existence
// is checked by the statement itself, so a config never outlives a purged
// task.
func (x execTx) PushConfigUpsert(ctx context.Context, c *store.PushConfig, at time.Time) (*store.PushConfig, error) {
	out, err := scanPushConfig(x.tx.QueryRowContext(ctx, `INSERT INTO a2a_push_configs (`+pushConfigColumns+`)
		SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8 WHERE EXISTS (SELECT 1 FROM tasks WHERE id = ?1)
		ON CONFLICT (task_id, id) DO UPDATE SET url = excluded.url, token = excluded.token,
			auth_scheme = excluded.auth_scheme, auth_credentials = excluded.auth_credentials,
			protocol_version = excluded.protocol_version, updated_at = excluded.updated_at
		RETURNING `+pushConfigColumns,
		c.TaskID, c.ID, c.URL, c.Token, c.AuthScheme, c.AuthCredentials, c.ProtocolVersion, micros(at)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return out, err
}

// PushConfigPut implements store.Store.
func (s *Store) PushConfigPut(ctx context.Context, p *store.PushConfigPutParams) (*store.PushConfig, error) {
	if err := store.CheckPushConfigPut(p); err != nil {
		return nil, fmt.Errorf("put push config: %w", err)
	}
	at := fromMicros(micros(now(p.Now)))
	return writeExec(ctx, s, "put push config "+p.Config.ID+" of task "+p.Config.TaskID, func(x execTx) (*store.PushConfig, error) {
		return store.PutPushConfig(ctx, x, p, at)
	})
}

// PushConfigGet implements store.Store.
func (s *Store) PushConfigGet(ctx context.Context, taskID, id string) (*store.PushConfig, error) {
	c, err := scanPushConfig(s.reader.QueryRowContext(ctx, `SELECT `+pushConfigColumns+` FROM a2a_push_configs
		WHERE task_id = ? AND id = ?`, taskID, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get push config %s of task %s: %w", id, taskID, err)
	}
	return c, nil
}

// PushConfigList implements store.Store.
func (s *Store) PushConfigList(ctx context.Context, p *store.PushConfigListParams) ([]*store.PushConfig, error) {
	out, err := queryAll(ctx, s.reader, scanPushConfig, `SELECT `+pushConfigColumns+` FROM a2a_push_configs
		WHERE task_id = ? AND id > ? ORDER BY id LIMIT ?`, p.TaskID, p.AfterID, max(p.Limit, 1))
	if err != nil {
		return nil, fmt.Errorf("list push configs of task %s: %w", p.TaskID, err)
	}
	return out, nil
}

// PushConfigDelete implements store.Store.
func (s *Store) PushConfigDelete(ctx context.Context, taskID, id string) (bool, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM a2a_push_configs WHERE task_id = ? AND id = ?`, taskID, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("delete push config %s of task %s: %w", id, taskID, err)
	}
	return n > 0, nil
}
