#!/usr/bin/env bash
# Uploads ci/pipeline.yml: the one command of the pipeline's first step in the Buildkite UI.
#
# A pull request build: the agent skips each step whose `if_changed` globs match no file changed
# since the merge-base of HEAD and the PR's base branch. Any other build (the default branch,
# scheduled and manual builds, branches without a PR) runs every step: after a merge, a skipped
# step would never run. Where git cannot compute the diff, the agent runs every step.
set -euo pipefail
cd "$(dirname "$0")/.."

pipeline=ci/pipeline.yml
base="${BUILDKITE_PULL_REQUEST_BASE_BRANCH:-}"
if [[ "${BUILDKITE_PULL_REQUEST:-false}" != "false" && -n "$base" ]]; then
  # The checkout may not hold the base branch; without it the agent runs every step.
  git fetch --quiet origin "+refs/heads/$base:refs/remotes/origin/$base" ||
    echo "ci/upload.sh: could not fetch origin/$base; every step will run" >&2
  echo "ci/upload.sh: pull request into $base: steps run when their if_changed paths changed"
  exec buildkite-agent pipeline upload --apply-if-changed --git-diff-base "origin/$base" "$pipeline"
fi
echo "ci/upload.sh: not a pull request build: every step runs"
exec buildkite-agent pipeline upload --apply-if-changed=false "$pipeline"
