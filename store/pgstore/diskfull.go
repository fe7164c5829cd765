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
// naming the database and its server; other errors, and nil, pass as
// they are.
func (s *Store) classifyWrite(err error) error {
	if !isDiskFull(err) {
		return err
	}
	cc := s.pool.Config().ConnConfig
	return &store.DiskFullError{
		Where: fmt.Sprintf("PostgreSQL database %q on %s:%d", cc.Database, cc.Host, cc.Port),
		Cause: err.Error(),
	}
}

func isDiskFull(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == sqlstateDiskFull
}
