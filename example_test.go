package errand_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/errandhq/errand"
)

// A program registers an agent, runs an engine, submits a task and waits
// for its outcome.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "errand-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	client, err := errand.Open(ctx, "sqlite://"+filepath.Join(dir, "errand.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	summarize := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		if err := run.Progress(ctx, 1, 1, "Summarizing"); err != nil {
			return errand.Result{}, err
		}
		return errand.Result{Output: "Summary of " + run.Task().Goal}, nil
	})
	if err := client.RegisterAgent("default", summarize); err != nil {
		log.Fatal(err)
	}
	engine, err := errand.NewEngine(client, &errand.EngineConfig{Workers: 2})
	if err != nil {
		log.Fatal(err)
	}
	if err := engine.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer engine.Stop(ctx)

	task, err := client.Submit(ctx, &errand.SubmitParams{Goal: "the quarterly report", Priority: errand.Ptr(7)})
	if err != nil {
		log.Fatal(err)
	}

	// Follow the task's journal until it ends.
	sub, err := client.Subscribe(ctx, errand.EventFilter{TaskID: task.ID}, 0)
	if err != nil {
		log.Fatal(err)
	}
	for ev := range sub.Events() {
		fmt.Println(ev.Type)
		if ev.Type == errand.EventTaskCompleted || ev.Type == errand.EventTaskFailed {
			break
		}
	}
	sub.Close()

	done, err := client.Get(ctx, task.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(done.Status, string(done.Result))
	// Output:
	// task.created
	// task.started
	// task.progress
	// task.completed
	// completed {"output":"Summary of the quarterly report","warning":null}
}
