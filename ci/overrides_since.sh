#!/usr/bin/env bash
# Buildkite: the strict override checker on harness/ itself (`make overrides`). On a pull request
# it reports only the findings the PR adds: --since the merge-base with the PR's base branch (the
# base's tree is checked in a temporary directory; this checkout is not touched). Other builds
# check the whole tree.
set -euo pipefail
cd "$(dirname "$0")/.."

base="${BUILDKITE_PULL_REQUEST_BASE_BRANCH:-}"
if [[ "${BUILDKITE_PULL_REQUEST:-false}" != "false" && -n "$base" ]]; then
  git fetch --quiet origin "+refs/heads/$base:refs/remotes/origin/$base"
  since="$(git merge-base HEAD "origin/$base")"
  echo "ci/overrides_since.sh: pull request into $base: findings added since $since"
  exec make overrides SINCE="$since"
fi
echo "ci/overrides_since.sh: not a pull request build: the whole tree"
exec make overrides
