/*
Checks llmc/collectives.h: every collective on arrays of several lengths (shorter than the
ranks, not multiples of the shards' 16 floats, longer than ZERO_MAX_COUNT), in one process and
under mpirun. Built with -DZERO_MAX_COUNT=K (small), arrays of a few hundred floats take the
split path that GPT-2 XL's would past INT_MAX; with -DUSE_MPI every MPI call is intercepted
(MPI's profiling interface, PMPI_) and one whose count or extent passes ZERO_MAX_COUNT fails
the run. The values are small integers, so every sum is exact whatever the order.
Prints one line per check (rank 0); exit 0 when all pass on every rank.

    mpicc -DUSE_MPI -DZERO_MAX_COUNT=7 test_collectives.c -o test_collectives -lm && mpirun -np 3 ./test_collectives
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/collectives.h"

static int failures = 0;

#ifdef USE_MPI
// ----------------------------------------------------------------------------
// every MPI call's counts and extents checked against ZERO_MAX_COUNT

static long long too_big = 0;  // the largest count or extent seen past the limit

static void check_count(long long n) {
    if (n > ZERO_MAX_COUNT && n > too_big) { too_big = n; }
}

static void check_v(const int *counts, const int *displs) {
    int size;
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int r = 0; r < size; r++) { check_count((long long)counts[r] + (displs != NULL ? displs[r] : 0)); }
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    check_count(count);
    return PMPI_Bcast(buf, count, type, root, comm);
}
int MPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm) {
    int size;
    PMPI_Comm_size(comm, &size);
    check_count((long long)rc * size);
    return PMPI_Allgather(sb, sc, st, rb, rc, rt, comm);
}
int MPI_Allgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rc[], const int d[],
                   MPI_Datatype rt, MPI_Comm comm) {
    check_v(rc, d);
    return PMPI_Allgatherv(sb, sc, st, rb, rc, d, rt, comm);
}
int MPI_Iallgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rc[], const int d[],
                    MPI_Datatype rt, MPI_Comm comm, MPI_Request *req) {
    check_v(rc, d);
    return PMPI_Iallgatherv(sb, sc, st, rb, rc, d, rt, comm, req);
}
int MPI_Reduce_scatter(const void *sb, void *rb, const int rc[], MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    int size;
    long long total = 0;
    PMPI_Comm_size(comm, &size);
    for (int r = 0; r < size; r++) { total += rc[r]; }
    check_count(total);
    return PMPI_Reduce_scatter(sb, rb, rc, t, op, comm);
}
int MPI_Ireduce_scatter(const void *sb, void *rb, const int rc[], MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                        MPI_Request *req) {
    int size;
    long long total = 0;
    PMPI_Comm_size(comm, &size);
    for (int r = 0; r < size; r++) { total += rc[r]; }
    check_count(total);
    return PMPI_Ireduce_scatter(sb, rb, rc, t, op, comm, req);
}
int MPI_Reduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm) {
    check_count(count);
    return PMPI_Reduce(sb, rb, count, t, op, root, comm);
}
int MPI_Gatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rc[], const int d[], MPI_Datatype rt,
                int root, MPI_Comm comm) {
    check_count(sc);
    check_v(rc, d);
    return PMPI_Gatherv(sb, sc, st, rb, rc, d, rt, root, comm);
}
int MPI_Scatterv(const void *sb, const int sc[], const int d[], MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
                 int root, MPI_Comm comm) {
    check_count(rc);
    check_v(sc, d);
    return PMPI_Scatterv(sb, sc, d, st, rb, rc, rt, root, comm);
}
int MPI_Send(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
    check_count(count);
    return PMPI_Send(buf, count, t, dest, tag, comm);
}
int MPI_Recv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status *status) {
    check_count(count);
    return PMPI_Recv(buf, count, t, src, tag, comm, status);
}
#endif

// ----------------------------------------------------------------------------

static void check(int ok, const char *fmt, size_t n) {
    if (zero.rank == 0 || !ok) {
        printf("%s: ", ok ? "ok" : "FAILED");
        printf(fmt, n);
        printf("%s\n", zero.rank != 0 ? " (on a rank other than 0)" : "");
    }
    failures += !ok;
}

// rank r's value at i: small integers, their sums over ranks exact in float
static float value(int r, size_t i) { return (float)((int)(i % 251) + 1000 * (r + 1)); }

static float sum_over_ranks(size_t i) {
    float s = 0.0f;
    for (int r = 0; r < zero.size; r++) { s += value(r, i); }
    return s;
}

static int owner_of(size_t n, size_t i) {
    for (int r = 0; r < zero.size; r++) {
        size_t off, cnt;
        zero_shard_of(n, r, zero.size, &off, &cnt);
        if (i >= off && i < off + cnt) { return r; }
    }
    return -1;
}

static void check_floats(size_t n) {
    size_t off, cnt;
    zero_shard_of(n, zero.rank, zero.size, &off, &cnt);
    float *x = malloc_or_die(n * sizeof(float) + 4, "x"), *full = malloc_or_die(n * sizeof(float) + 4, "full");

    // the shards cover the array once, in order
    int ok = 1;
    for (size_t i = 0; i < n; i++) { ok &= owner_of(n, i) >= 0; }
    check(ok, "every element of %zu has one owner", n);

    for (size_t i = 0; i < n; i++) { x[i] = value(zero.rank, i); }
    zero_reduce_scatter_f32(x, n);
    ok = 1;
    for (size_t i = off; i < off + cnt; i++) { ok &= x[i] == sum_over_ranks(i); }
    check(ok, "reduce-scatter of %zu floats: this rank's shard holds the sums", n);

    for (size_t i = 0; i < n; i++) { x[i] = i >= off && i < off + cnt ? value(zero.rank, i) : -1.0f; }
    zero_all_gather_f32(x, n);
    ok = 1;
    for (size_t i = 0; i < n; i++) { ok &= x[i] == value(owner_of(n, i), i); }
    check(ok, "all-gather of %zu floats: every shard from its owner", n);

    for (size_t i = 0; i < n; i++) { x[i] = value(zero.rank, i); }
    zero_allreduce_f32(x, n);
    ok = 1;
    for (size_t i = 0; i < n; i++) { ok &= x[i] == sum_over_ranks(i); }
    check(ok, "all-reduce of %zu floats: every sum on every rank", n);

    float *shard = malloc_or_die(cnt * sizeof(float) + 4, "shard");
    for (size_t i = 0; i < cnt; i++) { shard[i] = value(zero.rank, off + i); }
    for (size_t i = 0; i < n; i++) { full[i] = -1.0f; }
    zero_gather_f32(shard, full, n);
    ok = 1;
    for (size_t i = 0; zero.rank == 0 && i < n; i++) { ok &= full[i] == value(owner_of(n, i), i); }
    check(ok, "gather of %zu floats onto rank 0", n);

    for (size_t i = 0; i < n; i++) { full[i] = zero.rank == 0 ? value(7, i) : -1.0f; }
    for (size_t i = 0; i < cnt; i++) { shard[i] = -1.0f; }
    zero_scatter_f32(full, shard, n);
    ok = 1;
    for (size_t i = 0; i < cnt; i++) { ok &= shard[i] == value(7, off + i); }
    check(ok, "scatter of %zu floats from rank 0", n);

    // ranges summed as they become final, in groups: a range longer than ZERO_MAX_COUNT,
    // ranges inside one shard and across shards, an empty one
    for (int gather = 0; gather <= 1; gather++) {
        enum { NUM = 5 };
        size_t start[NUM], count[NUM];
        int group[NUM] = {0, 0, 1, 2, 2};
        const size_t cuts[NUM + 1] = {0, n / 7, n / 7, n / 2, n - n / 5, n};  // (n/7, n/7): empty
        for (int k = 0; k < NUM; k++) { start[k] = cuts[NUM - 1 - k], count[k] = cuts[NUM - k] - cuts[NUM - 1 - k]; }
        ZeroRangeSums s;
        zero_range_sums_init(&s, n, NUM, start, count, group, gather);
        for (size_t i = 0; i < n; i++) { x[i] = value(zero.rank, i); }
        zero_range_sums_begin(&s, x);
        for (int g = 0; g <= 2; g++) { zero_range_sums_progress(&s, g); }
        zero_range_sums_end(&s);
        ok = 1;
        for (int k = 0; k < s.num_ranges; k++) { ok &= s.ranges[k].count <= (size_t)ZERO_MAX_COUNT; }
        for (size_t i = 0; i < n; i++) {
            if (gather || (i >= off && i < off + cnt)) { ok &= x[i] == sum_over_ranks(i); }
        }
        check(ok, gather ? "range sums of %zu floats, all-gathered: every sum on every rank"
                         : "range sums of %zu floats: this rank's shard holds the sums", n);
        zero_range_sums_free(&s);
    }
    free(shard);
    free(x);
    free(full);
}

static void check_doubles_and_bytes(size_t n) {
    double *d = malloc_or_die(n * sizeof(double) + 8, "d");
    for (size_t i = 0; i < n; i++) { d[i] = value(zero.rank, i); }
    zero_allreduce_f64(d, n, ZERO_SUM);
    int ok = 1;
    for (size_t i = 0; i < n; i++) { ok &= d[i] == sum_over_ranks(i); }
    check(ok, "all-reduce (sum) of %zu doubles", n);
    for (size_t i = 0; i < n; i++) { d[i] = value(zero.rank, i); }
    zero_allreduce_f64(d, n, ZERO_MAX);
    ok = 1;
    for (size_t i = 0; i < n; i++) { ok &= d[i] == value(zero.size - 1, i); }
    check(ok, "all-reduce (max) of %zu doubles", n);
    free(d);

    unsigned char *b = malloc_or_die(n + 1, "bytes");
    for (size_t i = 0; i < n; i++) { b[i] = (unsigned char)(zero.rank == 0 ? i * 7 + 3 : 0); }
    zero_broadcast(b, n, 0);
    ok = 1;
    for (size_t i = 0; i < n; i++) { ok &= b[i] == (unsigned char)(i * 7 + 3); }
    check(ok, "broadcast of %zu bytes from rank 0", n);
    free(b);
}

int main(int argc, char **argv) {
    zero_init(&argc, &argv);
    if (zero.rank == 0) { printf("%d rank(s), ZERO_MAX_COUNT %d\n", zero.size, ZERO_MAX_COUNT); }
    const size_t lengths[] = {1, 2, 15, 16, 17, 100, 257, 1000};
    for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++) {
        check_floats(lengths[k]);
        check_doubles_and_bytes(lengths[k]);
    }
#ifdef USE_MPI
    check(too_big == 0, "no MPI call's count or extent above ZERO_MAX_COUNT (largest past it: %zu)",
          (size_t)too_big);
#endif
    double all_failures = failures;
    zero_allreduce_f64(&all_failures, 1, ZERO_SUM);
    if (zero.rank == 0) { printf("%s\n", all_failures == 0 ? "all passed" : "some FAILED"); }
    return all_failures == 0 ? 0 : 1;
}
