#!/usr/bin/env bash
# Sets up a fresh Debian machine for this project, in one command (make setup):
# the Debian packages, the build, then the Tiny Shakespeare tokens and the GPT-2
# vocabulary in data/ (scripts/setup_data.sh: TINYSHAKESPEARE_TXT and
# GPT2_VOCAB_DIR point at local copies; otherwise they are downloaded).
set -euo pipefail
cd "$(dirname "$0")/.."

# build-essential, zlib: the programs. python3-venv: the project venv (.venv, from
# requirements.txt: PyTorch, tiktoken, transformers). unicode-data, nodejs, npm: the
# tokenizer's table check and reference. libopenblas-dev, libdnnl-dev: the yardsticks of dev/cpu (fp32, bf16). gnuplot-nox: loss
# plots. linux-perf: make profile. curl: downloads when no local copy is given.
# openmpi-bin, libopenmpi-dev: data-parallel training (mpirun, mpicc); iproute2: the
# two-host test's network namespaces. clang, libclang-rt-14-dev: the libFuzzer harnesses
# (make fuzz).
PACKAGES="build-essential zlib1g-dev python3-venv unicode-data
          libopenblas-dev libdnnl-dev gnuplot-nox linux-perf curl openmpi-bin libopenmpi-dev iproute2
          clang libclang-rt-14-dev"
PACKAGES="$PACKAGES libgoogle-perftools4"  # tcmalloc, preloaded into make bench's PyTorch
command -v node > /dev/null || PACKAGES="$PACKAGES nodejs"
command -v npm > /dev/null || PACKAGES="$PACKAGES npm"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "installing:$missing"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing
fi

bash scripts/setup_venv.sh
make -j"$(nproc)" all
bash scripts/setup_data.sh
