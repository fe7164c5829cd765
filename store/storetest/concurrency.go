package storetest

import "testing"

func testConcurrency(t *testing.T, newDatabase NewDatabaseFunc) {}
