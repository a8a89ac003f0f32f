#!/usr/bin/env bash
# The GEMM behind every matmul (llmc/gemm.h), checked against float64 for each micro-kernel
# variant: the one -march=native picks, each variant forced (the AVX-512 one runs on any
# x86-64, split into narrower vectors by GCC), the portable build, and a build without OpenMP.
# Builds with -Werror: the headers must stay warning-free in every configuration.
source "$(dirname "$0")/testlib.sh"
mkdir -p build
flags="-O2 -std=gnu11 -Wall -Wextra -Wno-unused-function -Wno-unused-parameter -Werror -I."
configs=(
    "native:-march=native -fopenmp"
    "avx512-forced:-march=native -fopenmp -DVEC_WIDTH=16"
    "avx2-forced:-march=native -fopenmp -DVEC_WIDTH=8"
    "sse-forced:-march=native -fopenmp -DVEC_WIDTH=4"
    "portable:-march=x86-64 -mtune=generic -fopenmp"
    "no-openmp:-march=native -Wno-unknown-pragmas"
)
for config in "${configs[@]}"; do
    name=${config%%:*}
    extra=${config#*:}
    bin=build/gemm_check_$name
    # shellcheck disable=SC2086  # the flags are word lists
    if out=$(gcc $flags $extra dev/cpu/gemm_check.c -o "$bin" -lm 2>&1); then
        pass "gemm builds: $name"
        expect_ok "gemm correct: $name" env OMP_NUM_THREADS=2 "$bin"
        if [ "$name" = native ]; then  # teams smaller than asked for (it asks for up to 4)
            expect_ok "gemm correct: $name, OMP_THREAD_LIMIT=2" env OMP_NUM_THREADS=2 OMP_THREAD_LIMIT=2 "$bin"
        fi
    else
        fail "gemm builds: $name" "$(printf '%s' "$out" | head -n 5 | tr '\n' ' ')"
    fi
done
