#!/bin/sh
# counts compiles (make's and replays' alike) in the build dir, then runs the compiler
for a in "$@"; do case "$a" in *.c) echo "$a" >> .fake-compiles ;; esac; done
exec "$@"
