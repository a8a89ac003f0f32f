#!/usr/bin/env bash
# make bench-tokenizer: GPT-2 encoding speed on Tiny Shakespeare in MB/s,
# single-threaded and on all cores (./tokenize --bench). Needs make data's
# vocabulary (or GPT2_VOCAB_DIR) and TINYSHAKESPEARE_TXT (or make data's copy).
# The measurement holds the machine's CPU lock exclusively.
set -euo pipefail
cd "$(dirname "$0")/../.."
vocab=${GPT2_VOCAB_DIR:-data/gpt2}
text=${TINYSHAKESPEARE_TXT:-data/tinyshakespeare/input.txt}
[ -f "$vocab/encoder.json" ] || { echo "error: $vocab/encoder.json: missing (run make data or set GPT2_VOCAB_DIR)" >&2; exit 1; }
[ -f "$text" ] || { echo "error: $text: missing (run make data or set TINYSHAKESPEARE_TXT)" >&2; exit 1; }
[ -x ./tokenize ] || make tokenize
if command -v flock >/dev/null; then
    flock -x /tmp/cpu.lock ./tokenize --vocab "$vocab" --bench "$text" "$@"
else
    ./tokenize --vocab "$vocab" --bench "$text" "$@"
fi
