#!/usr/bin/env bash
# [simulation] guide-guard rehearsal stand-in for SpecForge's apply script: applies the base patch
# patches/sglang/<target>/spec-capture.patch to the installed (editable) sglang checkout. Like the
# real script it applies that one patch only: the Ascend companion patch beside it is applied
# separately, after this script (SpecForge's Ascend tutorial).
set -euo pipefail
TARGET=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --target) TARGET="$2"; shift 2 ;;
        *) echo "usage: $0 --target vX.Y.Z" >&2; exit 2 ;;
    esac
done
echo "[simulation] apply_sglang_spec_capture_patch.sh --target ${TARGET}"
PATCH="$(cd "$(dirname "$0")/.." && pwd)/patches/sglang/${TARGET}/spec-capture.patch"
if [[ -z "$TARGET" || ! -f "$PATCH" ]]; then
    echo "no spec-capture patch for sglang ${TARGET:-?} (looked for $PATCH)" >&2
    exit 1
fi
SGLANG_DIR=$(python -c "import importlib.util, os; print(os.path.dirname(os.path.dirname(importlib.util.find_spec('sglang').origin)))")
APPLIED="$SGLANG_DIR/sglang/.spec_capture_patch.applied"
if [[ -f "$APPLIED" ]]; then
    echo "spec-capture patch already applied to $SGLANG_DIR"
    exit 0
fi
git -C "$SGLANG_DIR/.." apply -p1 "$PATCH"
echo "applied $(basename "$PATCH") to $SGLANG_DIR/.."
cp "$PATCH" "$APPLIED"
