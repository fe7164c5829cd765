package pgstore

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/errandhq/errand/store"
)

// sqlstateDiskFull is PostgreSQL's disk_full: the server found no room to
// extend a table, an index or its WAL. It aborts the transaction, and
// what was committed before is intact.
const sqlstateDiskFull = "53100"

// classifyWrite turns PostgreSQL's disk_full into a *store.DiskFullError
// naming the server and database; other errors pass as they are.
func (s *Store) classifyWrite(err error) error {
	cc := s.pool.Config().ConnConfig
	return diskFull(err, fmt.Sprintf("PostgreSQL database %q on %s:%d", cc.Database, cc.Host, cc.Port))
}

// diskFull is classifyWrite for the storage named where.
func diskFull(err error, where string) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != sqlstateDiskFull {
		return err
	}
	return &store.DiskFullError{Where: where, Cause: err.Error()}
}
