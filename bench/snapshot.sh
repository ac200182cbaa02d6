#!/bin/sh
# Lay out the mq package of one commit in a folder, so a benchmark can measure committed code
# while the work tree is being edited:
#     bench/snapshot.sh HEAD /tmp/mq-snap && PYTHONPATH=/tmp/mq-snap .venv/bin/python bench/depth.py
# PYTHONPATH comes before the editable install on sys.path, and every process of the daemon
# inherits it. The map is pyproject.toml's package-dir: core -> mq, actors -> mq/actors, ...
set -eu
rev=${1:?usage: snapshot.sh REV DIR}
dir=${2:?usage: snapshot.sh REV DIR}
rm -rf "$dir" && mkdir -p "$dir/src"
git archive "$rev" core actors http supervisor | tar -x -C "$dir/src"
mv "$dir/src/core" "$dir/mq"
for part in actors http supervisor; do mv "$dir/src/$part" "$dir/mq/$part"; done
rmdir "$dir/src"
git rev-parse "$rev" > "$dir/COMMIT"
echo "mq of $(cat "$dir/COMMIT") in $dir"
