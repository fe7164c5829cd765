#!/bin/sh
# survey-agent.sh: an errand exec agent that surveys a directory and asks
# a person one question. Plain POSIX sh, no jq; used by the README's
# five-minute walkthrough.
#
#   errand ask --agent survey --wait "."        # the goal is a directory
#
# Step 1 counts the files under the directory by extension, leaving out
# hidden files and directories (.git, .errand-demo…); step 2 asks which
# extension to look at; step 3, once answered, lists the largest files of
# that kind, in bytes, and finishes. errand checkpoints after every step, so
# a restart resumes where it stopped. Protocol: docs/exec-protocol.md.
set -eu

input=$(cat)
step=$(printf '%s\n' "$input" | sed -n 's/.*"step":{"number":\([0-9][0-9]*\).*/\1/p')
dir=$(printf '%s\n' "$input" | sed -n 's/^{"task":{"id":"[^"]*","goal":"\([^"\\]*\)".*/\1/p')
dir=${dir:-.}

# json_string prints its argument as a JSON string.
json_string() {
	printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/	/\\t/g' |
		awk 'BEGIN { printf "\"" } NR > 1 { printf "\\n" } { printf "%s", $0 } END { printf "\"" }'
}

# files lists the files under $dir, but not hidden ones or those in hidden
# directories; its arguments are more find tests, such as -name '*.md'.
files() {
	find "$dir" -name '.?*' ! -path "$dir" -prune -o -type f "$@" -print 2>/dev/null
}

if [ ! -d "$dir" ]; then
	printf '{"status":"error","error":%s,"retryable":false}\n' "$(json_string "survey-agent: $dir is not a directory")"
	exit 0
fi

echo "survey-agent: step ${step:-?} in $dir" >&2
case "$step" in
1)
	total=$(files | wc -l | tr -d ' ')
	top=$(files -name '*.*' | sed 's/.*\.//' | sort | uniq -c | sort -rn | head -5 |
		awk '{ printf "%s.%s (%s)", (NR > 1 ? ", " : ""), $2, $1 }')
	printf '{"status":"continue","output":{"files":%s,"top":%s},"progress":{"current":1,"total":3,"label":"counted files"}}\n' \
		"$total" "$(json_string "$top")"
	;;
2)
	top=$(printf '%s\n' "$input" | sed -n 's/.*"partial_result":{"files":[0-9]*,"top":"\([^"]*\)".*/\1/p')
	total=$(printf '%s\n' "$input" | sed -n 's/.*"partial_result":{"files":\([0-9]*\).*/\1/p')
	question="I found ${total:-some} files in $dir (not counting hidden ones); the most common kinds are: ${top:-none}. Which extension should I list the largest files of (for example: md)?"
	printf '{"status":"ask_user","question":%s,"progress":{"current":2,"total":3,"label":"waiting for you"}}\n' "$(json_string "$question")"
	;;
*)
	answer=$(printf '%s\n' "$input" | sed -n 's/.*"answers":\[.*"answer":"\([^"\\]*\)".*/\1/p')
	ext=$(printf '%s' "$answer" | tr -cd 'A-Za-z0-9_-')
	if [ -z "$ext" ]; then
		printf '{"status":"error","error":"survey-agent: the answer names no extension","retryable":false}\n'
		exit 0
	fi
	list=$(files -name "*.$ext" | while IFS= read -r f; do
		printf '%s %s\n' "$(wc -c <"$f" | tr -d ' ')" "$f"
	done | sort -rn | head -5 | awk '{ n = $1; sub(/^[0-9]+ /, ""); printf "- %s: %s bytes\n", $0, n }')
	report="Largest .$ext files in $dir, by size:
${list:-(none found)}"
	printf '{"status":"finish","output":%s,"progress":{"current":3,"total":3,"label":"done"}}\n' "$(json_string "$report")"
	;;
esac
