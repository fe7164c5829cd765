// Package errand is a durable task engine for AI agents.
//
// A task is a goal handed to an agent. errand keeps it in a database, runs
// it in the background under a lease, checkpoints it as it goes, retries it
// with backoff when it fails, recovers it when its worker dies, and records
// every change in a journal that callers can follow.
//
// A program opens a Client on a store, registers agents, submits tasks, and
// runs an Engine that claims and runs them:
//
//	client, err := errand.Open(ctx, "sqlite:///var/lib/errand/errand.db", nil)
//	client.RegisterAgent("default", errand.AgentFunc(summarize))
//	engine, err := errand.NewEngine(client, &errand.EngineConfig{Workers: 8})
//	go engine.Run(ctx)
//	task, err := client.Submit(ctx, &errand.SubmitParams{Goal: "Summarize the report"})
//
// Delivery is at least once: an agent whose worker dies mid-task runs again
// from its last checkpoint. Every write a worker makes is fenced by its
// lease token, so a worker that lost its lease can never overwrite the work
// of the one that took the task over.
package errand
