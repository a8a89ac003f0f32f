#!/usr/bin/env bash
# Sets up a fresh Debian 12 or 13 machine for this project, in one command (make setup):
# the Debian packages, the project's Python (.venv, scripts/setup/setup_venv.sh), the build, then
# the Tiny Shakespeare tokens and the GPT-2 vocabulary in data/ (scripts/setup/setup_data.sh:
# TINYSHAKESPEARE_TXT and GPT2_VOCAB_DIR point at local copies; otherwise they are downloaded).
set -euo pipefail
cd "$(dirname "$0")/../.."

# build-essential, zlib: the programs. python3-venv: the project venv (.venv, from
# requirements.txt: PyTorch, tiktoken, regex, transformers, safetensors). unicode-data: the
# check of the tokenizer's character tables. libopenblas-dev, libdnnl-dev: the yardsticks of
# dev/cpu (fp32, bf16). gnuplot-nox: loss plots. linux-perf: make profile. curl: downloads
# when no local copy is given. openmpi-bin, libopenmpi-dev: data-parallel training (mpirun,
# mpicc); iproute2: the two-host test's network namespaces. clang and its compiler runtime
# (below): the libFuzzer harnesses (make fuzz). tcmalloc (below): preloaded into make bench's PyTorch.
PACKAGES="build-essential zlib1g-dev python3-venv unicode-data
          libopenblas-dev libdnnl-dev gnuplot-nox linux-perf curl openmpi-bin libopenmpi-dev iproute2
          clang"

sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
installed() { dpkg-query -W -f='${Status}' "$1" 2> /dev/null | grep -q "install ok installed"; }
apt_updated=0
apt_update_once() {
    if [ $apt_updated = 0 ]; then $sudo apt-get update -q; apt_updated=1; fi
}
# apt_install PACKAGE...: installs the ones not installed yet
apt_install() {
    local missing="" p
    for p in "$@"; do installed "$p" || missing="$missing $p"; done
    [ -n "$missing" ] || return 0
    apt_update_once
    echo "installing:$missing"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing
}

apt_install $PACKAGES
# Names that differ between Debian releases are derived, not written down: the compiler
# runtime (libFuzzer) is versioned like the clang installed (14 on Debian 12, 19 on 13) ...
clang_major=$(clang -dumpversion | cut -d. -f1)
apt_install "libclang-rt-$clang_major-dev"
# ... and tcmalloc's library is libgoogle-perftools4t64 since Debian 13's 64-bit time_t
# transition, libgoogle-perftools4 before: the one apt knows.
tcmalloc=""
for p in libgoogle-perftools4t64 libgoogle-perftools4; do
    if installed "$p"; then tcmalloc=$p; break; fi
done
if [ -z "$tcmalloc" ]; then
    apt_update_once
    for p in libgoogle-perftools4t64 libgoogle-perftools4; do
        if apt-cache show --no-all-versions "$p" 2> /dev/null | grep -q '^Package:'; then tcmalloc=$p; break; fi
    done
    [ -n "$tcmalloc" ] || { echo "error: apt knows neither libgoogle-perftools4t64 nor libgoogle-perftools4 (tcmalloc)" >&2; exit 1; }
    apt_install "$tcmalloc"
fi

bash scripts/setup/setup_venv.sh
make -j"$(nproc)" all
bash scripts/setup/setup_data.sh
