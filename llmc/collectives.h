/*
Collectives across the processes (ranks) of a data-parallel job: ranges of a flat array in,
sums out. Nothing here knows the model; llmc/zero.h is the GPT-2 trainer's use of it.

`mpirun -np N PROGRAM` starts N ranks. Built without USE_MPI (no mpicc), or run without
mpirun, this is one rank of one: every collective is a no-op (or a copy), and MPI is never
touched. The names keep llm.c's prefix for this layer, zero_.

Every sum of floats across ranks is computed once, by one rank, and then copied to the others
(reduce-scatter, then all-gather), and small sums of doubles are added in rank order on every
rank: all ranks hold bit-identical results, and a rerun with the same N is bit-identical.

A flat array of n floats is split into shards, one per rank (zero_shard_of): each starts on a
16-float boundary, the last may be shorter (MPI's v-variants take per-rank counts, so nothing
needs padding in memory).

MPI counts and displacements are ints: every function here takes size_t counts, and an array
whose extent passes ZERO_MAX_COUNT elements (INT_MAX; -DZERO_MAX_COUNT=K lowers it, so that a
test runs the splitting on small arrays) goes in pieces of at most that many elements, each
summed (or copied) by its shard's owner, as the single call would.

Only rank 0 writes to stdout (the others' stdout goes to /dev/null); errors on any rank name it
("error: rank 1: ...") and end the whole job (MPI_Abort), never a hang.
*/
#pragma once

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef USE_MPI
#include <mpi.h>
#endif

#include "utils.h"

#ifndef ZERO_MAX_COUNT
#define ZERO_MAX_COUNT INT_MAX  // elements in one MPI call (its counts and displacements are ints)
#endif

typedef struct {
    int rank, size;
    int mpi;              // MPI_Init was called (launched by mpirun)
    double comm_seconds;  // time spent in collectives so far
    double wait_seconds;  // of which waiting for the slowest rank before the gradient sum
} Zero;

static Zero zero = {0, 1, 0, 0.0, 0.0};

enum { ZERO_SUM, ZERO_MAX };

#ifdef USE_MPI
static void zero_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);  // not reached
}
#endif

static void zero_finalize(void) {
#ifdef USE_MPI
    int finalized = 0;
    if (zero.mpi && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) { MPI_Finalize(); }
#endif
}

// Called first thing in main. Under mpirun: MPI_Init, rank and size; without it (no
// launcher in the environment), one rank of one and MPI is never touched.
static void zero_init(int *argc, char ***argv) {
#ifdef USE_MPI
    if (getenv("OMPI_COMM_WORLD_SIZE") == NULL && getenv("PMIX_RANK") == NULL && getenv("PMI_SIZE") == NULL) {
        return;
    }
    if (MPI_Init(argc, argv) != MPI_SUCCESS) { die("MPI_Init failed"); }
    zero.mpi = 1;
    atexit(zero_finalize);  // a normal exit (-h, the end) finalizes; errors abort instead
    MPI_Comm_rank(MPI_COMM_WORLD, &zero.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &zero.size);
    if (zero.size > 1) {
        snprintf(die_rank_label, sizeof(die_rank_label), "rank %d: ", zero.rank);
        die_exit_hook = zero_abort;
        // one voice on stdout: rank 0's
        if (zero.rank != 0 && freopen("/dev/null", "w", stdout) == NULL) { die("cannot silence stdout"); }
    }
#else
    (void)argc;
    (void)argv;
#endif
}

// The elements of the next piece of a transfer of n, `done` of them already gone.
static size_t zero_piece(size_t n, size_t done) {
    return n - done < (size_t)ZERO_MAX_COUNT ? n - done : (size_t)ZERO_MAX_COUNT;
}

static void zero_barrier(void) {
#ifdef USE_MPI
    if (zero.size > 1) {
        double t0 = now_seconds();
        MPI_Barrier(MPI_COMM_WORLD);
        zero.comm_seconds += now_seconds() - t0;
    }
#endif
}

// Copies `bytes` bytes at data from rank root to every rank.
static void zero_broadcast(void *data, size_t bytes, int root) {
#ifdef USE_MPI
    if (zero.size == 1) { return; }
    double t0 = now_seconds();
    for (size_t done = 0, n; done < bytes; done += n) {
        n = zero_piece(bytes, done);
        MPI_Bcast((char *)data + done, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
    }
    zero.comm_seconds += now_seconds() - t0;
#else
    (void)data; (void)bytes; (void)root;
#endif
}

// x (n) becomes the sum (or max) over ranks of x, added in rank order on every rank:
// the same bits everywhere. For a few scalars (losses, sums of squares).
static void zero_allreduce_f64(double *x, size_t n, int op) {
#ifdef USE_MPI
    if (zero.size == 1) { return; }
    double t0 = now_seconds();
    const size_t per_call = (size_t)ZERO_MAX_COUNT / (size_t)zero.size;  // the gathered count must fit
    if (per_call == 0) { die("ZERO_MAX_COUNT %d is below the %d ranks", ZERO_MAX_COUNT, zero.size); }
    double *all = malloc_or_die((n < per_call ? n : per_call) * zero.size * sizeof(double), "all-reduce");
    for (size_t done = 0; done < n;) {
        const size_t m = n - done < per_call ? n - done : per_call;
        double *xs = x + done;
        MPI_Allgather(xs, (int)m, MPI_DOUBLE, all, (int)m, MPI_DOUBLE, MPI_COMM_WORLD);
        for (size_t i = 0; i < m; i++) {
            double s = op == ZERO_MAX ? all[i] : 0.0;
            for (int r = op == ZERO_MAX ? 1 : 0; r < zero.size; r++) {
                const double v = all[(size_t)r * m + i];
                s = op == ZERO_MAX ? (v > s ? v : s) : s + v;
            }
            xs[i] = s;
        }
        done += m;
    }
    free(all);
    zero.comm_seconds += now_seconds() - t0;
#else
    (void)x; (void)n; (void)op;
#endif
}

// Every rank must run the same job (model, batch, schedule, data): this rank's `bytes` at
// data are compared with rank 0's, and a difference is this rank's error (the job ends).
static void zero_check_same(const void *data, size_t bytes, const char *what) {
    if (zero.size == 1) { return; }
    char *root = malloc_or_die(bytes, "rank 0's settings");
    memcpy(root, data, bytes);
    zero_broadcast(root, bytes, 0);
    if (memcmp(root, data, bytes) != 0) { die("%s differ from rank 0's: every rank must run the same command", what); }
    free(root);
}

// Rank r's shard of a flat array of n floats: [*offset, *offset + *count). Shards are
// ceil(n / size) rounded up to 16 floats (64 bytes), the last one what is left.
static void zero_shard_of(size_t n, int rank, int size, size_t *offset, size_t *count) {
    size_t shard = ((n + (size_t)size - 1) / (size_t)size + 15) / 16 * 16;
    size_t start = (size_t)rank * shard < n ? (size_t)rank * shard : n;
    *offset = start;
    *count = n - start < shard ? n - start : shard;
}

// An in-place reduce-scatter leaves this rank's part of the sum (count floats) at the start
// of the buffer x: it belongs at x + offset (the parts of the lower ranks come first).
static void zero_place_part(float *x, size_t offset, size_t count) {
    if (offset > 0) { memmove(x + offset, x, count * sizeof(float)); }
}

#ifdef USE_MPI
// The shards of an array of n floats as MPI's v-variants want them: counts and offsets
// (n <= ZERO_MAX_COUNT, so both fit).
static int *zero_shard_table(size_t n) {
    int *counts = malloc_or_die(2 * (size_t)zero.size * sizeof(int), "shard table");
    for (int r = 0; r < zero.size; r++) {
        size_t off, cnt;
        zero_shard_of(n, r, zero.size, &off, &cnt);
        counts[r] = (int)cnt;
        counts[zero.size + r] = (int)off;
    }
    return counts;
}
#endif

// x (n) is summed over ranks, in place, but only this rank's shard of the sum is kept:
// x[offset, offset + count) (zero_shard_of); the rest of x is then garbage.
static void zero_reduce_scatter_f32(float *x, size_t n) {
#ifdef USE_MPI
    if (zero.size == 1) { return; }
    double t0 = now_seconds();
    if (n <= (size_t)ZERO_MAX_COUNT) {
        int *counts = zero_shard_table(n), *displs = counts + zero.size;
        MPI_Reduce_scatter(MPI_IN_PLACE, x, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        zero_place_part(x, (size_t)displs[zero.rank], (size_t)counts[zero.rank]);
        free(counts);
    } else {  // each shard's pieces summed onto its owner
        for (int r = 0; r < zero.size; r++) {
            size_t off, cnt;
            zero_shard_of(n, r, zero.size, &off, &cnt);
            for (size_t done = 0, m; done < cnt; done += m) {
                m = zero_piece(cnt, done);
                float *piece = x + off + done;
                MPI_Reduce(r == zero.rank ? MPI_IN_PLACE : piece, piece, (int)m, MPI_FLOAT, MPI_SUM, r,
                           MPI_COMM_WORLD);
            }
        }
    }
    zero.comm_seconds += now_seconds() - t0;
#else
    (void)x; (void)n;
#endif
}

// Every rank's shard of x (n), at its offset, is copied to every rank, in place.
static void zero_all_gather_f32(float *x, size_t n) {
#ifdef USE_MPI
    if (zero.size == 1) { return; }
    double t0 = now_seconds();
    if (n <= (size_t)ZERO_MAX_COUNT) {
        int *counts = zero_shard_table(n), *displs = counts + zero.size;
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
        free(counts);
    } else {
        for (int r = 0; r < zero.size; r++) {
            size_t off, cnt;
            zero_shard_of(n, r, zero.size, &off, &cnt);
            for (size_t done = 0, m; done < cnt; done += m) {
                m = zero_piece(cnt, done);
                MPI_Bcast(x + off + done, (int)m, MPI_FLOAT, r, MPI_COMM_WORLD);
            }
        }
    }
    zero.comm_seconds += now_seconds() - t0;
#else
    (void)x; (void)n;
#endif
}

// x (n) becomes the sum over ranks on every rank: a reduce-scatter, then an all-gather
// (a ring all-reduce's two halves), so each element is added up once.
static void zero_allreduce_f32(float *x, size_t n) {
    zero_reduce_scatter_f32(x, n);
    zero_all_gather_f32(x, n);
}

// Rank 0's full (n) from every rank's shard (zero_shard_of), or the reverse (scatter).
// One rank: a copy.
static void zero_gather_f32(const float *shard, float *full, size_t n) {
#ifdef USE_MPI
    if (zero.size > 1) {
        double t0 = now_seconds();
        if (n <= (size_t)ZERO_MAX_COUNT) {
            int *counts = zero_shard_table(n), *displs = counts + zero.size;
            MPI_Gatherv(shard, counts[zero.rank], MPI_FLOAT, full, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD);
            free(counts);
        } else {
            for (int r = 0; r < zero.size; r++) {
                size_t off, cnt;
                zero_shard_of(n, r, zero.size, &off, &cnt);
                for (size_t done = 0, m; done < cnt; done += m) {
                    m = zero_piece(cnt, done);
                    if (zero.rank == 0 && r == 0) { memcpy(full + off + done, shard + done, m * sizeof(float)); }
                    else if (zero.rank == 0) { MPI_Recv(full + off + done, (int)m, MPI_FLOAT, r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
                    else if (zero.rank == r) { MPI_Send(shard + done, (int)m, MPI_FLOAT, 0, 0, MPI_COMM_WORLD); }
                }
            }
        }
        zero.comm_seconds += now_seconds() - t0;
        return;
    }
#endif
    memcpy(full, shard, n * sizeof(float));
}

static void zero_scatter_f32(const float *full, float *shard, size_t n) {
#ifdef USE_MPI
    if (zero.size > 1) {
        double t0 = now_seconds();
        if (n <= (size_t)ZERO_MAX_COUNT) {
            int *counts = zero_shard_table(n), *displs = counts + zero.size;
            MPI_Scatterv(full, counts, displs, MPI_FLOAT, shard, counts[zero.rank], MPI_FLOAT, 0, MPI_COMM_WORLD);
            free(counts);
        } else {
            for (int r = 0; r < zero.size; r++) {
                size_t off, cnt;
                zero_shard_of(n, r, zero.size, &off, &cnt);
                for (size_t done = 0, m; done < cnt; done += m) {
                    m = zero_piece(cnt, done);
                    if (zero.rank == 0 && r == 0) { memcpy(shard + done, full + off + done, m * sizeof(float)); }
                    else if (zero.rank == 0) { MPI_Send(full + off + done, (int)m, MPI_FLOAT, r, 0, MPI_COMM_WORLD); }
                    else if (zero.rank == r) { MPI_Recv(shard + done, (int)m, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
                }
            }
        }
        zero.comm_seconds += now_seconds() - t0;
        return;
    }
#endif
    memcpy(shard, full, n * sizeof(float));
}

// ----------------------------------------------------------------------------
// sums of ranges started as they become final (overlapping the work that produces them)

// A range of the flat array of n floats, summed by a non-blocking reduce-scatter onto the
// owners of the shards it crosses: the same sums, at the same places, as the blocking
// zero_reduce_scatter_f32 of the whole array.
typedef struct {
    size_t start, count;  // floats of the flat array (count <= ZERO_MAX_COUNT)
    int group;            // ranges are started a group at a time, in order
    int *counts, *displs; // (size): its part in each rank's shard: counts, offsets from start
} ZeroRange;

typedef struct {
    int num_ranges;
    ZeroRange *ranges;      // in the order they become final
    int all_gather;         // 1: each range's sum then goes to every rank; 0: its owners keep it
    float *x;               // the array being summed (between begin and end)
    int started, finished;  // ranges whose reduce-scatter was started, waited for
#ifdef USE_MPI
    MPI_Request *requests;  // (2, num_ranges): each range's reduce-scatter, then its all-gather
#endif
} ZeroRangeSums;

// The ranges (start[k], count[k], group[k]; groups non-decreasing) of a flat array of n floats,
// a range past ZERO_MAX_COUNT split into pieces of the same group.
static void zero_range_sums_init(ZeroRangeSums *s, size_t n, int num, const size_t *start, const size_t *count,
                                 const int *group, int all_gather) {
    memset(s, 0, sizeof(*s));
    s->all_gather = all_gather;
    size_t total = 0;
    for (int k = 0; k < num; k++) { total += (count[k] + (size_t)ZERO_MAX_COUNT - 1) / (size_t)ZERO_MAX_COUNT; }
    if (total > (size_t)INT_MAX / 2) { die("%zu ranges to sum: too many", total); }
    s->ranges = malloc_or_die(total * sizeof(ZeroRange), "ranges to sum");
    int *tables = malloc_or_die(total * 2 * (size_t)zero.size * sizeof(int), "ranges' shard tables");
    for (int k = 0; k < num; k++) {
        for (size_t done = 0, m; done < count[k]; done += m) {
            m = zero_piece(count[k], done);
            ZeroRange *r = &s->ranges[s->num_ranges];
            *r = (ZeroRange){start[k] + done, m, group[k], tables + (size_t)s->num_ranges * 2 * zero.size, NULL};
            r->displs = r->counts + zero.size;
            for (int q = 0; q < zero.size; q++) {
                size_t off, cnt;
                zero_shard_of(n, q, zero.size, &off, &cnt);
                const size_t lo = off > r->start ? off : r->start;
                const size_t hi = off + cnt < r->start + r->count ? off + cnt : r->start + r->count;
                r->counts[q] = lo < hi ? (int)(hi - lo) : 0;
                r->displs[q] = lo < hi ? (int)(lo - r->start) : 0;
            }
            s->num_ranges++;
        }
    }
    if (s->num_ranges == 0) { free(tables); }
#ifdef USE_MPI
    s->requests = malloc_or_die((size_t)s->num_ranges * 2 * sizeof(MPI_Request), "requests");
    for (int k = 0; k < 2 * s->num_ranges; k++) { s->requests[k] = MPI_REQUEST_NULL; }
#endif
}

static void zero_range_sums_free(ZeroRangeSums *s) {
    if (s->ranges != NULL && s->num_ranges > 0) { free(s->ranges[0].counts); }
    free(s->ranges);
#ifdef USE_MPI
    free(s->requests);
#endif
}

// Before the work that makes the ranges of x final.
static void zero_range_sums_begin(ZeroRangeSums *s, float *x) {
    s->x = x;
    s->started = s->finished = 0;
}

#ifdef USE_MPI
// Waits for range k's reduce-scatter and puts this rank's part in place; with all_gather,
// starts the all-gather that copies every rank's part to every rank.
static void zero_finish_range(ZeroRangeSums *s, int k) {
    ZeroRange *r = &s->ranges[k];
    float *x = s->x + r->start;
    MPI_Wait(&s->requests[k], MPI_STATUS_IGNORE);
    zero_place_part(x, (size_t)r->displs[zero.rank], (size_t)r->counts[zero.rank]);
    if (s->all_gather) {
        MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, r->counts, r->displs, MPI_FLOAT, MPI_COMM_WORLD,
                        &s->requests[s->num_ranges + k]);
    }
}
#endif

// The ranges of groups up to final_group are final: starts their sums, in order, and lets the
// outstanding ones progress (OpenMPI progresses non-blocking collectives only inside MPI calls).
// A range's all-gather starts when the group after next becomes final (a group's reduce-scatters
// are waited for then: by then they are likely done), so that every rank starts the same
// collectives in the same order.
static void zero_range_sums_progress(ZeroRangeSums *s, int final_group) {
#ifdef USE_MPI
    if (zero.size == 1) { return; }
    double t0 = now_seconds();
    while (s->started < s->num_ranges && s->ranges[s->started].group <= final_group) {
        ZeroRange *r = &s->ranges[s->started];
        while (s->all_gather && s->ranges[s->finished].group < r->group - 1) { zero_finish_range(s, s->finished++); }
        MPI_Ireduce_scatter(MPI_IN_PLACE, s->x + r->start, r->counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                            &s->requests[s->started]);
        s->started++;
    }
    int done;
    MPI_Testall(2 * s->num_ranges, s->requests, &done, MPI_STATUSES_IGNORE);
    zero.comm_seconds += now_seconds() - t0;
#else
    (void)s; (void)final_group;
#endif
}

// After the work: waits for every range's sum (all were started: the last group was final).
static void zero_range_sums_end(ZeroRangeSums *s) {
#ifdef USE_MPI
    if (zero.size == 1) { return; }
    double t0 = now_seconds();
    if (s->started != s->num_ranges) { die("the sums of %d ranges were never started", s->num_ranges - s->started); }
    while (s->finished < s->num_ranges) { zero_finish_range(s, s->finished++); }
    MPI_Waitall(2 * s->num_ranges, s->requests, MPI_STATUSES_IGNORE);
    zero.comm_seconds += now_seconds() - t0;
#else
    (void)s;
#endif
}
