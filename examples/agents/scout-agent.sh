#!/bin/sh
# scout-agent.sh: a heartbeat scout as an errand exec agent, in plain
# POSIX sh. No LLM account needed.
#
# A heartbeat schedule runs it every few minutes. errand puts what changed
# into the task's input: {"heartbeat": {"since", "now", "failed": [...],
# "stuck": [...], "waiting": [...]}}. The scout answers with a decision,
# which errand carries out when the scout's task completes:
#
#   {"decision": "noop", "reason": "..."}
#   {"decision": "submit_task", "tasks": [{"goal": ..., "agent": ...}], "alerts": [...]}
#
# This one asks the `echo` agent to look into each task that failed since
# its last look, and raises one alert saying how many failed.
#
#   agents:
#     scout: {kind: exec, command: ["./examples/agents/scout-agent.sh"]}
#   schedules:
#     watch: {kind: heartbeat, spec: 5m, task: {agent: scout, goal: "Watch the queue"}}
set -eu

input=$(cat)
failed=$(printf '%s\n' "$input" | grep -o '"failed":\[[^]]*\]' | grep -o '"id":"tsk_[0-9A-Z]*"' |
	sed 's/"id":"\(.*\)"/\1/' || true)

if [ -z "$failed" ]; then
	printf '{"status":"finish","output":{"decision":"noop","reason":"nothing failed since the last look"}}\n'
	exit 0
fi

count=0
tasks=""
for id in $failed; do
	count=$((count + 1))
	tasks="$tasks${tasks:+,}{\"goal\":\"Find out why task $id failed\",\"agent\":\"echo\",\"input\":{\"failed_task\":\"$id\"}}"
done
echo "scout-agent: $count failed task(s)" >&2
printf '{"status":"finish","output":{"decision":"submit_task","reason":"%s task(s) failed","tasks":[%s],"alerts":["%s task(s) failed since the last look"]}}\n' \
	"$count" "$tasks" "$count"
