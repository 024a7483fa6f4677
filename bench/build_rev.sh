#!/usr/bin/env bash
# Builds meshdns (release) at a commit and prints the binary's path. Binaries are cached by
# commit in $BUILD_CACHE (default /tmp/meshdns-builds), so a second call is instant; every
# commit is checked out in one detached worktree there and shares one target directory, so
# consecutive builds are incremental.
#
#   bench/build_rev.sh REV          # e.g. bench/build_rev.sh cbd6b73
#   bench/build_rev.sh .            # the working tree, built into $CARGO_TARGET_DIR or target/
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
CACHE=${BUILD_CACHE:-/tmp/meshdns-builds}
[ $# -eq 1 ] || { sed -n 2,8p "$0" >&2; exit 2; }
if [ "$1" = . ]; then
  (cd "$REPO" && cargo build --release -p meshdns >&2)
  echo "${CARGO_TARGET_DIR:-$REPO/target}/release/meshdns"
  exit 0
fi
sha=$(git -C "$REPO" rev-parse --verify "$1^{commit}")
bin=$CACHE/meshdns-${sha:0:12}
if [ ! -x "$bin" ]; then
  mkdir -p "$CACHE"
  if [ -d "$CACHE/src" ]; then
    git -C "$CACHE/src" checkout -q --detach "$sha"
  else
    git -C "$REPO" worktree add -q --detach "$CACHE/src" "$sha"
  fi
  (cd "$CACHE/src" && cargo build --release -p meshdns --target-dir "$CACHE/target" >&2)
  cp "$CACHE/target/release/meshdns" "$bin.tmp" && mv "$bin.tmp" "$bin"
fi
echo "$bin"
