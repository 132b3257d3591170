#!/bin/sh
# fixdep <depfile> <target> <cmdline>: kbuild's .cmd record from the compiler's dependency file.
dep=$1 target=$2 cmd=$3
printf 'cmd_%s := %s\n\n' "$target" "$cmd"
first=1
for w in $(sed -e 's/\\$//' "$dep"); do
	case "$w" in *:) continue ;; esac
	if [ $first = 1 ]; then
		printf 'source_%s := %s\n\ndeps_%s := \\\n' "$target" "$w" "$target"
		first=0
	else
		printf '  %s \\\n' "$w"
	fi
done
printf '\n%s: $(deps_%s)\n\n$(deps_%s):\n' "$target" "$target" "$target"
