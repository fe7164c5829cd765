#!/bin/sh
# shell-agent.sh: an errand exec agent in plain POSIX sh, three steps long.
#
# errand runs this script once per step. It reads one JSON document on
# stdin ({"task": {...}, "state": {...}, "step": {"number": n, ...}}) and
# prints one JSON document on stdout ({"status": ..., "output": ...}).
# Logs go to stderr; errand keeps the end of it when a step fails.
# The protocol: docs/exec-protocol.md.
#
# Configure it as an agent in errand.yaml:
#   agents:
#     shell: {kind: exec, command: ["./examples/agents/shell-agent.sh"]}
#
# No jq needed: sed pulls the few fields out of errand's compact JSON (good
# enough for simple goals), and printf writes the answer by hand.
set -eu

input=$(cat)

# Field extraction. errand writes the document compactly with "task" first
# and "id" then "goal" first inside it; a goal may hold escaped quotes.
step=$(printf '%s\n' "$input" | sed -n 's/.*"step":{"number":\([0-9][0-9]*\).*/\1/p')
key=$(printf '%s\n' "$input" | sed -n 's/.*"idempotency_key":"\([^"]*\)".*/\1/p')
goal=$(printf '%s\n' "$input" | sed -n 's/^{"task":{"id":"[^"]*","goal":"\(\([^"\\]*\\.\)*[^"\\]*\)".*/\1/p')

echo "shell-agent: step ${step:-?} of 3 (key $key)" >&2

case "$step" in
1)
	# Side effects would be deduplicated with $key: it is the same on every
	# attempt of this step.
	printf '{"status":"continue","output":{"step":1,"note":"gathered notes"},"progress":{"current":1,"total":3,"label":"gathering"}}\n'
	;;
2)
	printf '{"status":"continue","output":{"step":2,"note":"wrote a draft"},"progress":{"current":2,"total":3,"label":"drafting"}}\n'
	;;
3)
	printf '{"status":"finish","output":"Finished: %s","progress":{"current":3,"total":3,"label":"done"}}\n' "$goal"
	;;
*)
	printf '{"status":"error","error":"shell-agent: unexpected step %s","retryable":false}\n' "${step:-none}"
	;;
esac
