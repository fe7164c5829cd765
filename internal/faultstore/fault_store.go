// Package faultstore wraps a store.Store to inject faults for crash and
// fault tests: a call at a named point can fail before it reaches the
// inner store (nothing is written) or after it (the write commits but the
// caller sees an error), and a hook can hold a call to stage a race.
//
// A point is named after the store method it guards, such as
// "TaskFinishMany"; Points lists them all. Close is passed through and
// cannot be faulted.
package faultstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/errandhq/errand/store"
)

// When says on which side of the inner call an injected fault strikes.
type When int

const (
	// Before fails the call without calling the inner store: nothing is
	// written.
	Before When = iota + 1
	// After calls the inner store, so a write commits, then discards its
	// result and returns the injected error: the "committed but the
	// caller saw an error" case.
	After
)

func (w When) String() string {
	switch w {
	case Before:
		return "Before"
	case After:
		return "After"
	}
	return fmt.Sprintf("When(%d)", int(w))
}

// Store wraps a store.Store and fails calls at named points. Its methods
// are safe for concurrent use, with each other and with store calls.
type Store struct {
	inner store.Store

	mu     sync.Mutex
	points map[string]*point // one per name in Points, fixed at New
}

var _ store.Store = (*Store)(nil)

// point is the fault state of one point, guarded by Store.mu.
type point struct {
	calls int
	when  When
	err   error
	times int // calls left to fail; < 0 fails every call, 0 none
	hook  func(ctx context.Context) error
}

// New returns a Store that passes every call to inner until told to fail.
func New(inner store.Store) *Store {
	points := make(map[string]*point, len(Points))
	for _, name := range Points {
		points[name] = &point{}
	}
	return &Store{inner: inner, points: points}
}

// Inject fails the next times calls at point: with when Before they return
// err without calling the inner store, with After they call it and return
// err instead of its result. A times < 0 fails every call until Clear; a
// times of 0 clears. A later Inject at the same point replaces this one.
//
// Inject panics if point is not in Points, when is neither Before nor
// After, or err is nil.
func (s *Store) Inject(point string, when When, err error, times int) {
	if when != Before && when != After {
		panic(fmt.Sprintf("faultstore: Inject(%q): when is %v, want Before or After", point, when))
	}
	if err == nil {
		panic(fmt.Sprintf("faultstore: Inject(%q): nil error", point))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mustPoint("Inject", point)
	p.when, p.err, p.times = when, err, times
}

// Clear removes the fault injected at point. The hook and the call count
// stay. It panics if point is not in Points.
func (s *Store) Clear(point string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mustPoint("Clear", point)
	p.when, p.err, p.times = 0, nil, 0
}

// Calls returns how many calls reached point, failed or not. It panics if
// point is not in Points.
func (s *Store) Calls(point string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mustPoint("Calls", point).calls
}

// Hook runs f with the call's ctx at the start of each call at point,
// before any injected fault is taken; a nil f removes the hook. A non-nil
// error from f fails the call as Before does, without using up an
// injected fault. f runs without locks held, so it may block, on a
// channel for instance, to hold the call while the test stages a race.
// It panics if point is not in Points.
func (s *Store) Hook(point string, f func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustPoint("Hook", point).hook = f
}

func (s *Store) mustPoint(method, name string) *point {
	p, ok := s.points[name]
	if !ok {
		panic(fmt.Sprintf("faultstore: %s: unknown point %q; points are the store.Store method names in faultstore.Points", method, name))
	}
	return p
}

// enter counts a call at point, runs its hook and takes an injected fault.
// It returns the error to fail with and when; when is 0 if the call
// proceeds normally.
func (s *Store) enter(ctx context.Context, name string) (When, error) {
	s.mu.Lock()
	p := s.mustPoint("call", name)
	p.calls++
	hook := p.hook
	s.mu.Unlock()

	if hook != nil {
		if err := hook(ctx); err != nil {
			return Before, err
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if p.times == 0 {
		return 0, nil
	}
	if p.times > 0 {
		p.times--
	}
	return p.when, p.err
}

// call runs f, the inner store call at point, under the faults injected
// there. Every wrapped method is one call, so a new store.Store method
// needs one line here and a name in Points.
func call[T any](ctx context.Context, s *Store, point string, f func() (T, error)) (T, error) {
	var zero T
	when, err := s.enter(ctx, point)
	switch when {
	case Before:
		return zero, err
	case After:
		_, _ = f()
		return zero, err
	}
	return f()
}

// call0 is call for methods that return only an error.
func call0(ctx context.Context, s *Store, point string, f func() error) error {
	_, err := call(ctx, s, point, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// TaskInsert calls the inner store's TaskInsert under the faults at point "TaskInsert".
func (s *Store) TaskInsert(ctx context.Context, params *store.TaskInsertParams) (*store.TaskInsertResult, error) {
	return call(ctx, s, "TaskInsert", func() (*store.TaskInsertResult, error) { return s.inner.TaskInsert(ctx, params) })
}

// TaskFork calls the inner store's TaskFork under the faults at point "TaskFork".
func (s *Store) TaskFork(ctx context.Context, params *store.TaskForkParams) (*store.Task, error) {
	return call(ctx, s, "TaskFork", func() (*store.Task, error) { return s.inner.TaskFork(ctx, params) })
}

// TaskGetByID calls the inner store's TaskGetByID under the faults at point "TaskGetByID".
func (s *Store) TaskGetByID(ctx context.Context, id string) (*store.Task, error) {
	return call(ctx, s, "TaskGetByID", func() (*store.Task, error) { return s.inner.TaskGetByID(ctx, id) })
}

// TaskList calls the inner store's TaskList under the faults at point "TaskList".
func (s *Store) TaskList(ctx context.Context, params *store.TaskListParams) ([]*store.Task, error) {
	return call(ctx, s, "TaskList", func() ([]*store.Task, error) { return s.inner.TaskList(ctx, params) })
}

// TaskCountByStatus calls the inner store's TaskCountByStatus under the faults at point "TaskCountByStatus".
func (s *Store) TaskCountByStatus(ctx context.Context) (map[store.Status]int, error) {
	return call(ctx, s, "TaskCountByStatus", func() (map[store.Status]int, error) { return s.inner.TaskCountByStatus(ctx) })
}

// TaskLeaseMany calls the inner store's TaskLeaseMany under the faults at point "TaskLeaseMany".
func (s *Store) TaskLeaseMany(ctx context.Context, params *store.TaskLeaseManyParams) ([]*store.Task, error) {
	return call(ctx, s, "TaskLeaseMany", func() ([]*store.Task, error) { return s.inner.TaskLeaseMany(ctx, params) })
}

// LeaseRenewMany calls the inner store's LeaseRenewMany under the faults at point "LeaseRenewMany".
func (s *Store) LeaseRenewMany(ctx context.Context, params *store.LeaseRenewManyParams) ([]store.LeaseRenewResult, error) {
	return call(ctx, s, "LeaseRenewMany", func() ([]store.LeaseRenewResult, error) { return s.inner.LeaseRenewMany(ctx, params) })
}

// TaskCheckpoint calls the inner store's TaskCheckpoint under the faults at point "TaskCheckpoint".
func (s *Store) TaskCheckpoint(ctx context.Context, params *store.TaskCheckpointParams) error {
	return call0(ctx, s, "TaskCheckpoint", func() error { return s.inner.TaskCheckpoint(ctx, params) })
}

// TaskProgress calls the inner store's TaskProgress under the faults at point "TaskProgress".
func (s *Store) TaskProgress(ctx context.Context, params *store.TaskProgressParams) error {
	return call0(ctx, s, "TaskProgress", func() error { return s.inner.TaskProgress(ctx, params) })
}

// TaskFinishMany calls the inner store's TaskFinishMany under the faults at point "TaskFinishMany".
func (s *Store) TaskFinishMany(ctx context.Context, params []*store.TaskFinishParams) ([]error, error) {
	return call(ctx, s, "TaskFinishMany", func() ([]error, error) { return s.inner.TaskFinishMany(ctx, params) })
}

// TaskCancel calls the inner store's TaskCancel under the faults at point "TaskCancel".
func (s *Store) TaskCancel(ctx context.Context, params *store.TaskCancelParams) (*store.Task, error) {
	return call(ctx, s, "TaskCancel", func() (*store.Task, error) { return s.inner.TaskCancel(ctx, params) })
}

// TaskRetry calls the inner store's TaskRetry under the faults at point "TaskRetry".
func (s *Store) TaskRetry(ctx context.Context, params *store.TaskRetryParams) (*store.Task, error) {
	return call(ctx, s, "TaskRetry", func() (*store.Task, error) { return s.inner.TaskRetry(ctx, params) })
}

// TaskRecover calls the inner store's TaskRecover under the faults at point "TaskRecover".
func (s *Store) TaskRecover(ctx context.Context, params *store.TaskRecoverParams) ([]*store.Task, error) {
	return call(ctx, s, "TaskRecover", func() ([]*store.Task, error) { return s.inner.TaskRecover(ctx, params) })
}

// LeaseOwnerList calls the inner store's LeaseOwnerList under the faults at point "LeaseOwnerList".
func (s *Store) LeaseOwnerList(ctx context.Context) ([]string, error) {
	return call(ctx, s, "LeaseOwnerList", func() ([]string, error) { return s.inner.LeaseOwnerList(ctx) })
}

// EventList calls the inner store's EventList under the faults at point "EventList".
func (s *Store) EventList(ctx context.Context, params *store.EventListParams) ([]*store.Event, error) {
	return call(ctx, s, "EventList", func() ([]*store.Event, error) { return s.inner.EventList(ctx, params) })
}

// TaskBudgetReserve calls the inner store's TaskBudgetReserve under the faults at point "TaskBudgetReserve".
func (s *Store) TaskBudgetReserve(ctx context.Context, params *store.TaskBudgetReserveParams) error {
	return call0(ctx, s, "TaskBudgetReserve", func() error { return s.inner.TaskBudgetReserve(ctx, params) })
}

// TaskDependencyAdd calls the inner store's TaskDependencyAdd under the faults at point "TaskDependencyAdd".
func (s *Store) TaskDependencyAdd(ctx context.Context, params *store.TaskDependencyAddParams) (*store.Task, error) {
	return call(ctx, s, "TaskDependencyAdd", func() (*store.Task, error) { return s.inner.TaskDependencyAdd(ctx, params) })
}

// DependencyList calls the inner store's DependencyList under the faults at point "DependencyList".
func (s *Store) DependencyList(ctx context.Context, taskIDs []string) ([]*store.Dependency, error) {
	return call(ctx, s, "DependencyList", func() ([]*store.Dependency, error) { return s.inner.DependencyList(ctx, taskIDs) })
}

// DependentList calls the inner store's DependentList under the faults at point "DependentList".
func (s *Store) DependentList(ctx context.Context, taskIDs []string) ([]*store.Dependency, error) {
	return call(ctx, s, "DependentList", func() ([]*store.Dependency, error) { return s.inner.DependentList(ctx, taskIDs) })
}

// TaskPause calls the inner store's TaskPause under the faults at point "TaskPause".
func (s *Store) TaskPause(ctx context.Context, params *store.TaskPauseParams) (*store.Task, error) {
	return call(ctx, s, "TaskPause", func() (*store.Task, error) { return s.inner.TaskPause(ctx, params) })
}

// TaskResume calls the inner store's TaskResume under the faults at point "TaskResume".
func (s *Store) TaskResume(ctx context.Context, params *store.TaskPauseParams) (*store.Task, error) {
	return call(ctx, s, "TaskResume", func() (*store.Task, error) { return s.inner.TaskResume(ctx, params) })
}

// InputAnswer calls the inner store's InputAnswer under the faults at point "InputAnswer".
func (s *Store) InputAnswer(ctx context.Context, params *store.InputAnswerParams) (*store.InputRequest, error) {
	return call(ctx, s, "InputAnswer", func() (*store.InputRequest, error) { return s.inner.InputAnswer(ctx, params) })
}

// InputExpire calls the inner store's InputExpire under the faults at point "InputExpire".
func (s *Store) InputExpire(ctx context.Context, now *time.Time) (int, error) {
	return call(ctx, s, "InputExpire", func() (int, error) { return s.inner.InputExpire(ctx, now) })
}

// InputList calls the inner store's InputList under the faults at point "InputList".
func (s *Store) InputList(ctx context.Context, params *store.InputListParams) ([]*store.InputRequest, error) {
	return call(ctx, s, "InputList", func() ([]*store.InputRequest, error) { return s.inner.InputList(ctx, params) })
}

// StepStart calls the inner store's StepStart under the faults at point "StepStart".
func (s *Store) StepStart(ctx context.Context, params *store.StepStartParams) (*store.StepStartResult, error) {
	return call(ctx, s, "StepStart", func() (*store.StepStartResult, error) { return s.inner.StepStart(ctx, params) })
}

// StepFinish calls the inner store's StepFinish under the faults at point "StepFinish".
func (s *Store) StepFinish(ctx context.Context, params *store.StepFinishParams) (*store.Step, error) {
	return call(ctx, s, "StepFinish", func() (*store.Step, error) { return s.inner.StepFinish(ctx, params) })
}

// TaskAgentChange calls the inner store's TaskAgentChange under the faults at point "TaskAgentChange".
func (s *Store) TaskAgentChange(ctx context.Context, params *store.TaskAgentChangeParams) error {
	return call0(ctx, s, "TaskAgentChange", func() error { return s.inner.TaskAgentChange(ctx, params) })
}

// StepListByTask calls the inner store's StepListByTask under the faults at point "StepListByTask".
func (s *Store) StepListByTask(ctx context.Context, params *store.StepListParams) ([]*store.Step, error) {
	return call(ctx, s, "StepListByTask", func() ([]*store.Step, error) { return s.inner.StepListByTask(ctx, params) })
}

// EventLastID calls the inner store's EventLastID under the faults at point "EventLastID".
func (s *Store) EventLastID(ctx context.Context) (int64, error) {
	return call(ctx, s, "EventLastID", func() (int64, error) { return s.inner.EventLastID(ctx) })
}

// NotificationList calls the inner store's NotificationList under the faults at point "NotificationList".
func (s *Store) NotificationList(ctx context.Context, params *store.NotificationListParams) ([]*store.Notification, error) {
	return call(ctx, s, "NotificationList", func() ([]*store.Notification, error) { return s.inner.NotificationList(ctx, params) })
}

// NotificationAck calls the inner store's NotificationAck under the faults at point "NotificationAck".
func (s *Store) NotificationAck(ctx context.Context, params *store.NotificationAckParams) (int, error) {
	return call(ctx, s, "NotificationAck", func() (int, error) { return s.inner.NotificationAck(ctx, params) })
}

// CursorGet calls the inner store's CursorGet under the faults at point "CursorGet".
func (s *Store) CursorGet(ctx context.Context, name string) (int64, bool, error) {
	type cursor struct {
		eventID int64
		found   bool
	}
	c, err := call(ctx, s, "CursorGet", func() (cursor, error) {
		id, found, err := s.inner.CursorGet(ctx, name)
		return cursor{id, found}, err
	})
	return c.eventID, c.found, err
}

// CursorSet calls the inner store's CursorSet under the faults at point "CursorSet".
func (s *Store) CursorSet(ctx context.Context, params *store.CursorSetParams) error {
	return call0(ctx, s, "CursorSet", func() error { return s.inner.CursorSet(ctx, params) })
}

// SpendSince calls the inner store's SpendSince under the faults at point "SpendSince".
func (s *Store) SpendSince(ctx context.Context, since time.Time) (float64, error) {
	return call(ctx, s, "SpendSince", func() (float64, error) { return s.inner.SpendSince(ctx, since) })
}

// SpendGuardGet calls the inner store's SpendGuardGet under the faults at point "SpendGuardGet".
func (s *Store) SpendGuardGet(ctx context.Context, now *time.Time) (*store.SpendGuard, error) {
	return call(ctx, s, "SpendGuardGet", func() (*store.SpendGuard, error) { return s.inner.SpendGuardGet(ctx, now) })
}

// SpendGuardSet calls the inner store's SpendGuardSet under the faults at point "SpendGuardSet".
func (s *Store) SpendGuardSet(ctx context.Context, params *store.SpendGuardSetParams) (*store.SpendGuard, bool, error) {
	var changed bool
	g, err := call(ctx, s, "SpendGuardSet", func() (*store.SpendGuard, error) {
		g, c, err := s.inner.SpendGuardSet(ctx, params)
		changed = c
		return g, err
	})
	return g, changed, err
}

// SpendGuardResume calls the inner store's SpendGuardResume under the faults at point "SpendGuardResume".
func (s *Store) SpendGuardResume(ctx context.Context, params *store.SpendGuardResumeParams) (*store.SpendGuard, error) {
	return call(ctx, s, "SpendGuardResume", func() (*store.SpendGuard, error) { return s.inner.SpendGuardResume(ctx, params) })
}

// BatchExport calls the inner store's BatchExport under the faults at point "BatchExport".
func (s *Store) BatchExport(ctx context.Context, params *store.BatchExportParams) (*store.Batch, error) {
	return call(ctx, s, "BatchExport", func() (*store.Batch, error) { return s.inner.BatchExport(ctx, params) })
}

// BatchImport calls the inner store's BatchImport under the faults at point "BatchImport".
func (s *Store) BatchImport(ctx context.Context, batch *store.Batch) error {
	return call0(ctx, s, "BatchImport", func() error { return s.inner.BatchImport(ctx, batch) })
}

// ScheduleInsert calls the inner store's ScheduleInsert under the faults at point "ScheduleInsert".
func (s *Store) ScheduleInsert(ctx context.Context, params *store.ScheduleInsertParams) (*store.Schedule, error) {
	return call(ctx, s, "ScheduleInsert", func() (*store.Schedule, error) { return s.inner.ScheduleInsert(ctx, params) })
}

// ScheduleGetByID calls the inner store's ScheduleGetByID under the faults at point "ScheduleGetByID".
func (s *Store) ScheduleGetByID(ctx context.Context, id string) (*store.Schedule, error) {
	return call(ctx, s, "ScheduleGetByID", func() (*store.Schedule, error) { return s.inner.ScheduleGetByID(ctx, id) })
}

// ScheduleGetByName calls the inner store's ScheduleGetByName under the faults at point "ScheduleGetByName".
func (s *Store) ScheduleGetByName(ctx context.Context, name string) (*store.Schedule, error) {
	return call(ctx, s, "ScheduleGetByName", func() (*store.Schedule, error) { return s.inner.ScheduleGetByName(ctx, name) })
}

// ScheduleList calls the inner store's ScheduleList under the faults at point "ScheduleList".
func (s *Store) ScheduleList(ctx context.Context, params *store.ScheduleListParams) ([]*store.Schedule, error) {
	return call(ctx, s, "ScheduleList", func() ([]*store.Schedule, error) { return s.inner.ScheduleList(ctx, params) })
}

// ScheduleUpdate calls the inner store's ScheduleUpdate under the faults at point "ScheduleUpdate".
func (s *Store) ScheduleUpdate(ctx context.Context, params *store.ScheduleUpdateParams) (*store.Schedule, error) {
	return call(ctx, s, "ScheduleUpdate", func() (*store.Schedule, error) { return s.inner.ScheduleUpdate(ctx, params) })
}

// ScheduleDelete calls the inner store's ScheduleDelete under the faults at point "ScheduleDelete".
func (s *Store) ScheduleDelete(ctx context.Context, id string) error {
	return call0(ctx, s, "ScheduleDelete", func() error { return s.inner.ScheduleDelete(ctx, id) })
}

// ScheduleFire calls the inner store's ScheduleFire under the faults at point "ScheduleFire".
func (s *Store) ScheduleFire(ctx context.Context, params *store.ScheduleFireParams) (*store.ScheduleFireResult, error) {
	return call(ctx, s, "ScheduleFire", func() (*store.ScheduleFireResult, error) { return s.inner.ScheduleFire(ctx, params) })
}

// TaskPurge calls the inner store's TaskPurge under the faults at point "TaskPurge".
func (s *Store) TaskPurge(ctx context.Context, params *store.TaskPurgeParams) (*store.TaskPurgeResult, error) {
	return call(ctx, s, "TaskPurge", func() (*store.TaskPurgeResult, error) { return s.inner.TaskPurge(ctx, params) })
}

// EventInsert calls the inner store's EventInsert under the faults at point "EventInsert".
func (s *Store) EventInsert(ctx context.Context, params *store.EventInsertParams) (*store.Event, error) {
	return call(ctx, s, "EventInsert", func() (*store.Event, error) { return s.inner.EventInsert(ctx, params) })
}

// MemoryInsert calls the inner store's MemoryInsert under the faults at point "MemoryInsert".
func (s *Store) MemoryInsert(ctx context.Context, params *store.MemoryInsertParams) (*store.MemoryInsertResult, error) {
	return call(ctx, s, "MemoryInsert", func() (*store.MemoryInsertResult, error) { return s.inner.MemoryInsert(ctx, params) })
}

// MemoryGetByID calls the inner store's MemoryGetByID under the faults at point "MemoryGetByID".
func (s *Store) MemoryGetByID(ctx context.Context, id string) (*store.Memory, error) {
	return call(ctx, s, "MemoryGetByID", func() (*store.Memory, error) { return s.inner.MemoryGetByID(ctx, id) })
}

// MemoryList calls the inner store's MemoryList under the faults at point "MemoryList".
func (s *Store) MemoryList(ctx context.Context, params *store.MemoryListParams) ([]*store.Memory, error) {
	return call(ctx, s, "MemoryList", func() ([]*store.Memory, error) { return s.inner.MemoryList(ctx, params) })
}

// MemorySearch calls the inner store's MemorySearch under the faults at point "MemorySearch".
func (s *Store) MemorySearch(ctx context.Context, params *store.MemorySearchParams) ([]*store.Memory, error) {
	return call(ctx, s, "MemorySearch", func() ([]*store.Memory, error) { return s.inner.MemorySearch(ctx, params) })
}

// MemoryNearest calls the inner store's MemoryNearest under the faults at point "MemoryNearest".
func (s *Store) MemoryNearest(ctx context.Context, params *store.MemoryNearestParams) ([]*store.MemoryNearest, error) {
	return call(ctx, s, "MemoryNearest", func() ([]*store.MemoryNearest, error) { return s.inner.MemoryNearest(ctx, params) })
}

// MemoryRefresh calls the inner store's MemoryRefresh under the faults at point "MemoryRefresh".
func (s *Store) MemoryRefresh(ctx context.Context, params *store.MemoryRefreshParams) (*store.Memory, error) {
	return call(ctx, s, "MemoryRefresh", func() (*store.Memory, error) { return s.inner.MemoryRefresh(ctx, params) })
}

// MemoryFlag calls the inner store's MemoryFlag under the faults at point "MemoryFlag".
func (s *Store) MemoryFlag(ctx context.Context, params *store.MemoryFlagParams) (*store.Memory, error) {
	return call(ctx, s, "MemoryFlag", func() (*store.Memory, error) { return s.inner.MemoryFlag(ctx, params) })
}

// MemoryRelease calls the inner store's MemoryRelease under the faults at point "MemoryRelease".
func (s *Store) MemoryRelease(ctx context.Context, params *store.MemoryReleaseParams) (*store.Memory, error) {
	return call(ctx, s, "MemoryRelease", func() (*store.Memory, error) { return s.inner.MemoryRelease(ctx, params) })
}

// MemoryConflictRecord calls the inner store's MemoryConflictRecord under the faults at point "MemoryConflictRecord".
func (s *Store) MemoryConflictRecord(ctx context.Context, params *store.MemoryConflictParams) (bool, error) {
	return call(ctx, s, "MemoryConflictRecord", func() (bool, error) { return s.inner.MemoryConflictRecord(ctx, params) })
}

// MemoryDelete calls the inner store's MemoryDelete under the faults at point "MemoryDelete".
func (s *Store) MemoryDelete(ctx context.Context, params *store.MemoryDeleteParams) error {
	return call0(ctx, s, "MemoryDelete", func() error { return s.inner.MemoryDelete(ctx, params) })
}

// MemoryPurge calls the inner store's MemoryPurge under the faults at point "MemoryPurge".
func (s *Store) MemoryPurge(ctx context.Context, params *store.MemoryPurgeParams) (int64, error) {
	return call(ctx, s, "MemoryPurge", func() (int64, error) { return s.inner.MemoryPurge(ctx, params) })
}

// CheckWritable calls the inner store's CheckWritable under the faults at point "CheckWritable".
func (s *Store) CheckWritable(ctx context.Context) error {
	return call0(ctx, s, "CheckWritable", func() error { return s.inner.CheckWritable(ctx) })
}

// LeaderAcquire calls the inner store's LeaderAcquire under the faults at point "LeaderAcquire".
func (s *Store) LeaderAcquire(ctx context.Context, params *store.LeaderAcquireParams) (*store.Leader, error) {
	return call(ctx, s, "LeaderAcquire", func() (*store.Leader, error) { return s.inner.LeaderAcquire(ctx, params) })
}

// LeaderRelease calls the inner store's LeaderRelease under the faults at point "LeaderRelease".
func (s *Store) LeaderRelease(ctx context.Context, params *store.LeaderReleaseParams) error {
	return call0(ctx, s, "LeaderRelease", func() error { return s.inner.LeaderRelease(ctx, params) })
}

// PushConfigPut calls the inner store's PushConfigPut under the faults at point "PushConfigPut".
func (s *Store) PushConfigPut(ctx context.Context, params *store.PushConfigPutParams) (*store.PushConfig, error) {
	return call(ctx, s, "PushConfigPut", func() (*store.PushConfig, error) { return s.inner.PushConfigPut(ctx, params) })
}

// PushConfigGet calls the inner store's PushConfigGet under the faults at point "PushConfigGet".
func (s *Store) PushConfigGet(ctx context.Context, taskID, id string) (*store.PushConfig, error) {
	return call(ctx, s, "PushConfigGet", func() (*store.PushConfig, error) { return s.inner.PushConfigGet(ctx, taskID, id) })
}

// PushConfigList calls the inner store's PushConfigList under the faults at point "PushConfigList".
func (s *Store) PushConfigList(ctx context.Context, params *store.PushConfigListParams) ([]*store.PushConfig, error) {
	return call(ctx, s, "PushConfigList", func() ([]*store.PushConfig, error) { return s.inner.PushConfigList(ctx, params) })
}

// PushConfigDelete calls the inner store's PushConfigDelete under the faults at point "PushConfigDelete".
func (s *Store) PushConfigDelete(ctx context.Context, taskID, id string) (bool, error) {
	return call(ctx, s, "PushConfigDelete", func() (bool, error) { return s.inner.PushConfigDelete(ctx, taskID, id) })
}

// Close closes the inner store. It cannot be faulted.
func (s *Store) Close() error { return s.inner.Close() }
