#!/usr/bin/env bash
# Sets up Tiny Shakespeare for training (make data):
#   data/gpt2/encoder.json, data/gpt2/vocab.bpe               GPT-2's vocabulary
#   data/tinyshakespeare/tiny_shakespeare_val_000000.bin      first 32,768 tokens
#   data/tinyshakespeare/tiny_shakespeare_train_000000.bin    the rest
#   data/tinyshakespeare/gpt2_tokenizer.bin                   for decoding samples
#   data/tinyshakespeare/input.txt                            the corpus (the tests read it)
# Whichever way the inputs came, everything later steps (make test) read is then in
# data/: they need no variables set.
# Documents as llm.c's tinyshakespeare.py makes them: each blank-line-separated
# section, EOT before each (--split-blank-lines), so the shards equal llm.c's.
#
# Inputs, from the environment when set:
#   TINYSHAKESPEARE_TXT   path of Tiny Shakespeare's input.txt (else it is downloaded
#                         from its canonical URL in karpathy/char-rnn)
#   GPT2_VOCAB_DIR        directory holding encoder.json and vocab.bpe (else they are
#                         downloaded from OpenAI's public GPT-2 files, GPT2_VOCAB_URL: by
#                         default https://openaipublic.blob.core.windows.net/gpt-2/encodings/main)
# Every file's SHA-256 is checked; a download goes to a temporary name and is renamed
# only once checked, so a failure leaves no partial file. Errors are one line. Run from
# anywhere; writes under the repository's data/.
set -euo pipefail
cd "$(dirname "$0")/../.."

TINYSHAKESPEARE_URL=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
TINYSHAKESPEARE_SHA256=86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
GPT2_VOCAB_URL=${GPT2_VOCAB_URL:-https://openaipublic.blob.core.windows.net/gpt-2/encodings/main}
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

# download URL DST SHA256 HINT: DST from URL unless it is there with that SHA-256; the
# file is written as DST.tmp, checked, then renamed. HINT ends the one-line error.
download() {
    local url=$1 dst=$2 sha=$3 hint=$4 err
    if [ -f "$dst" ] && [ "$(sha256sum "$dst" | cut -d' ' -f1)" = "$sha" ]; then return 0; fi
    echo "downloading $url"
    if ! err=$(curl -fsSL --connect-timeout 30 --retry 3 -o "$dst.tmp" "$url" 2>&1); then
        rm -f "$dst.tmp"
        echo "error: could not download $url: $(printf '%s' "$err" | tail -n 1) ($hint)" >&2
        exit 1
    fi
    local got
    got=$(sha256sum "$dst.tmp" | cut -d' ' -f1)
    if [ "$got" != "$sha" ]; then
        rm -f "$dst.tmp"
        echo "error: $url: SHA-256 is $got, expected $sha (not the file this setup expects)" >&2
        exit 1
    fi
    mv "$dst.tmp" "$dst"
}

# copy_if_changed SRC DST
copy_if_changed() {
    if ! cmp -s "$1" "$2" 2>/dev/null; then cp "$1" "$2.tmp" && chmod 644 "$2.tmp" && mv "$2.tmp" "$2"; fi
}

mkdir -p data/gpt2 data/tinyshakespeare

# the vocabulary
if [ -n "${GPT2_VOCAB_DIR:-}" ]; then
    echo "vocabulary: GPT2_VOCAB_DIR=$GPT2_VOCAB_DIR"
    check_sha256 "$GPT2_VOCAB_DIR/encoder.json" "$ENCODER_JSON_SHA256"
    check_sha256 "$GPT2_VOCAB_DIR/vocab.bpe" "$VOCAB_BPE_SHA256"
    copy_if_changed "$GPT2_VOCAB_DIR/encoder.json" data/gpt2/encoder.json
    copy_if_changed "$GPT2_VOCAB_DIR/vocab.bpe" data/gpt2/vocab.bpe
else
    echo "vocabulary: data/gpt2, downloaded from $GPT2_VOCAB_URL where missing"
    download "$GPT2_VOCAB_URL/encoder.json" data/gpt2/encoder.json "$ENCODER_JSON_SHA256" "set GPT2_VOCAB_DIR to a local copy"
    download "$GPT2_VOCAB_URL/vocab.bpe" data/gpt2/vocab.bpe "$VOCAB_BPE_SHA256" "set GPT2_VOCAB_DIR to a local copy"
fi
check_sha256 data/gpt2/encoder.json "$ENCODER_JSON_SHA256"
check_sha256 data/gpt2/vocab.bpe "$VOCAB_BPE_SHA256"

# the corpus
if [ -n "${TINYSHAKESPEARE_TXT:-}" ]; then
    echo "corpus: TINYSHAKESPEARE_TXT=$TINYSHAKESPEARE_TXT"
    check_sha256 "$TINYSHAKESPEARE_TXT" "$TINYSHAKESPEARE_SHA256"
    copy_if_changed "$TINYSHAKESPEARE_TXT" data/tinyshakespeare/input.txt
    text=data/tinyshakespeare/input.txt
else
    text=data/tinyshakespeare/input.txt
    download "$TINYSHAKESPEARE_URL" "$text" "$TINYSHAKESPEARE_SHA256" "set TINYSHAKESPEARE_TXT to a local copy"
fi
check_sha256 "$text" "$TINYSHAKESPEARE_SHA256"

[ -x ./prepare_data ] || make prepare_data
./prepare_data --vocab data/gpt2 -i "$text" -o data/tinyshakespeare --name tiny_shakespeare --val-tokens 32768 \
    --split-blank-lines
