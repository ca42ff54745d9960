#!/usr/bin/env bash
# [simulation] guide-guard rehearsal stand-in for SpecForge's apply script: applies
# patches/sglang/<target>/*.patch to the installed (editable) sglang checkout.
set -euo pipefail
TARGET=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --target) TARGET="$2"; shift 2 ;;
        *) echo "usage: $0 --target vX.Y.Z" >&2; exit 2 ;;
    esac
done
echo "[simulation] apply_sglang_spec_capture_patch.sh --target ${TARGET}"
PATCH_DIR="$(cd "$(dirname "$0")/.." && pwd)/patches/sglang/${TARGET}"
if [[ -z "$TARGET" || ! -d "$PATCH_DIR" ]]; then
    echo "no patches for sglang ${TARGET:-?} (looked in $PATCH_DIR)" >&2
    exit 1
fi
SGLANG_DIR=$(python -c "import importlib.util, os; print(os.path.dirname(os.path.dirname(importlib.util.find_spec('sglang').origin)))")
APPLIED="$SGLANG_DIR/sglang/.spec_capture_patch.applied"
if [[ -f "$APPLIED" ]]; then
    echo "spec-capture patches already applied to $SGLANG_DIR"
    exit 0
fi
for PATCH in "$PATCH_DIR"/*.patch; do
    git -C "$SGLANG_DIR/.." apply -p1 "$PATCH"
    echo "applied $(basename "$PATCH") to $SGLANG_DIR/.."
done
cat "$PATCH_DIR"/*.patch > "$APPLIED"
