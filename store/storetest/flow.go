package storetest

import "testing"

func testFlow(t *testing.T, newDatabase NewDatabaseFunc) {}
