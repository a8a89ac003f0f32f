/*
Random numbers from a 64-bit state (xorshift*, as llm.c): reproducible from a
seed on any machine, and the state is one integer, easy to checkpoint.
*/
#pragma once

#include <math.h>
#include <stdint.h>

static uint32_t random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

// Uniform in [0, 1).
static float random_f32(uint64_t *state) { return (float)(random_u32(state) >> 8) / 16777216.0f; }

// A state from a seed; any seed (also 0) gives a valid non-zero state.
static uint64_t random_seed_state(uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    return s != 0 ? s : 1;
}

// The state of stream `stream` of a seed: two rounds of splitmix64's mixer, so that streams
// 0, 1, 2, ... of one seed start far apart and uncorrelated.
static uint64_t random_stream_state(uint64_t seed, uint64_t stream) {
    uint64_t z = random_seed_state(seed) ^ (stream * 0xD1B54A32D192ED03ull);
    for (int round = 0; round < 2; round++) {
        z += 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
    }
    return z != 0 ? z : 1;
}

// Normal(mean, std) samples into out (n), Box-Muller in double.
static void random_normal(float *out, size_t n, float mean, float std, uint64_t *state) {
    for (size_t i = 0; i < n; i += 2) {
        double u1 = (random_u32(state) + 1.0) / 4294967297.0;  // (0, 1]: log(u1) is finite
        double u2 = random_u32(state) / 4294967296.0;
        double r = sqrt(-2.0 * log(u1));
        out[i] = (float)(mean + std * r * cos(2.0 * M_PI * u2));
        if (i + 1 < n) { out[i + 1] = (float)(mean + std * r * sin(2.0 * M_PI * u2)); }
    }
}

// Normal(mean, std) samples into out (n) in parallel: blocks of 65536 values, block b drawn
// from stream (stream_base + b) of the seed, so the values do not depend on the thread count.
static void random_normal_parallel(float *out, size_t n, float mean, float std, uint64_t seed,
                                   uint64_t stream_base) {
    const size_t block = (size_t)1 << 16;  // even: a Box-Muller pair never straddles two blocks
    const long long blocks = (long long)((n + block - 1) / block);
    #pragma omp parallel for schedule(static)
    for (long long b = 0; b < blocks; b++) {
        uint64_t state = random_stream_state(seed, stream_base + (uint64_t)b);
        const size_t i0 = (size_t)b * block;
        random_normal(out + i0, n - i0 < block ? n - i0 : block, mean, std, &state);
    }
}
