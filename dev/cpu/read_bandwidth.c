/*
The machine's memory read bandwidth: a streaming sum over a buffer much larger
than the caches, each thread summing its own contiguous part (first touched by
that thread). The yardstick for generate's tokens/s (scripts/bench/bench_generate.sh):
one token of incremental decoding reads every weight once, so bytes of weights /
this bandwidth is the fastest a token can be.

  ./read_bandwidth [MiB]   prints GB/s (1e9 bytes/s) with all threads (OMP_NUM_THREADS)
                           and with one, best of 7 passes; default 1024 MiB
*/
#include "read_bandwidth.h"

int main(int argc, char **argv) {
    const size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
    if (mib < 64 || mib > 65536) { fprintf(stderr, "error: %s MiB: outside 64..65536\n", argv[1]); return 2; }
    const size_t n = read_buffer_floats(mib);
    float *buf = read_buffer_create(n);
    if (buf == NULL) { fprintf(stderr, "error: cannot allocate %zu MiB\n", mib); return 1; }
    const int threads = omp_get_max_threads();
    printf("read bandwidth over %zu MiB: %.1f GB/s with %d threads, %.1f GB/s with 1\n", mib,
           read_gbs(buf, n, threads, 7), threads, read_gbs(buf, n, 1, 7));
    free(buf);
    return 0;
}
