#!/usr/bin/env bash
# [simulation] guide-guard rehearsal stand-in for SpecForge's apply script: applies the base patch
# patches/sglang/<target>/spec-capture.patch to the installed (editable) sglang. What it shares with the
# real script (issue 37): the default target v0.5.18, `ERROR: unsupported SGLang patch target: X` and
# exit 2 for another one, `git apply -p2` with --directory, and "already applied" decided by
# `git apply --reverse --check`, not by a receipt file. Like the real script it applies that one patch
# only: the Ascend companion patch beside it is applied separately, after this script (SpecForge's
# Ascend tutorial).
#
# REHEARSAL_BREAK=patch-script-silent-skip: the script runs git apply inside the sglang checkout without
# --directory, where git skips (status 0) every path outside that directory: it says "applied", its own
# check passes the same way, and nothing is patched.
set -euo pipefail
TARGET="v0.5.18"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --target)
            if [[ $# -lt 2 ]]; then
                echo "ERROR: --target requires a value" >&2
                exit 2
            fi
            TARGET="$2"
            shift 2
            ;;
        *) echo "ERROR: unknown argument: $1" >&2; exit 2 ;;
    esac
done
case "$TARGET" in
    v0.5.18) ;;
    *) echo "ERROR: unsupported SGLang patch target: $TARGET" >&2; exit 2 ;;
esac
echo "[simulation] apply_sglang_spec_capture_patch.sh --target ${TARGET}"
PATCH="$(cd "$(dirname "$0")/.." && pwd)/patches/sglang/${TARGET}/spec-capture.patch"
SGL_PARENT=$(python -c "import importlib.util, os; print(os.path.dirname(os.path.dirname(importlib.util.find_spec('sglang').origin)))")
# git apply runs at the top of the git work tree that holds sglang (the image's editable checkout), with
# --directory naming where sglang is in it; outside a work tree, in sglang's parent directory itself.
if TOP=$(git -C "$SGL_PARENT" rev-parse --show-toplevel 2>/dev/null); then
    RELATIVE=$(python -c "import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))" "$SGL_PARENT" "$TOP")
else
    TOP="$SGL_PARENT"
    RELATIVE="."
fi
DIRECTORY=()
[[ "$RELATIVE" != "." ]] && DIRECTORY=(--directory="$RELATIVE")
if [[ "${REHEARSAL_BREAK:-}" == patch-script-silent-skip ]]; then
    echo "[simulation] REHEARSAL_BREAK=patch-script-silent-skip: git apply -p2 inside $SGL_PARENT, no --directory" >&2
    TOP="$SGL_PARENT"
    DIRECTORY=()
elif git -C "$TOP" apply -p2 "${DIRECTORY[@]}" --reverse --check "$PATCH" 2>/dev/null; then
    echo "spec-capture patch $TARGET already applied at $SGL_PARENT/sglang"
    exit 0
fi
git -C "$TOP" apply -p2 "${DIRECTORY[@]}" "$PATCH"
git -C "$TOP" apply -p2 "${DIRECTORY[@]}" --reverse --check "$PATCH"
echo "spec-capture patch $TARGET applied at $SGL_PARENT/sglang"
