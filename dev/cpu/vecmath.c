/*
Accuracy of llmc/vecmath.h against double precision, in ulp of the float result.

  ./vecmath        checks vec_exp on every 4th float in [-104, 89] and every float in
                   [-1, 1] (dense where exp(x) ~ 1 + x), vec_sqrt on every 4th positive
                   float, and the GELU forms of gelu.h on every 4th float in [-12, 12];
                   prints the worst ulp and exits 1 above the bounds below; and that
                   vec_exp (vscalefps on AVX-512, integer arithmetic for results below
                   FLT_MIN) gives the plain two multiplies' bits (vec_exp_two_multiplies)
                   on every float.

Build it for each width (-DVEC_WIDTH=4|8|16) and with and without FMA to check every
code path: wider vectors than the target's still run, split by the compiler.
*/
#include "common.h"
#include "llmc/gelu.h"
#include "llmc/vecmath.h"

#define MAX_ULP_EXP 1.01
#define MAX_ULP_SQRT 0.5  // correctly rounded
#define MAX_ULP_GELU 2.5  // gelu and gelu' from vec_exp and a few roundings each, in ulps of 1

// |got - want| in units of the last place of max(|want|, floor) as a float (subnormal ulps
// below FLT_MIN). floor = 0 measures relative error; GELU is measured with floor 1, in
// ulps of its scale: its argument's rounding error, amplified by |x|^3, dominates the
// relative error of the tiny values at large negative x, in any fp32 formula (and the
// model's errors are measured against the largest values of a tensor).
static double ulp_floor;
static double ulp_error(float got, double want) {
    if (isnan(want)) { return isnan(got) ? 0.0 : INFINITY; }
    if (isinf((float)want) || isinf(got)) { return got == (float)want ? 0.0 : INFINITY; }  // overflow
    double a = fabs(want) > ulp_floor ? fabs(want) : ulp_floor;
    int e;
    frexp(a < 0x1p-126 ? 0x1p-126 : a, &e);
    double ulp = ldexp(1.0, e - 24);
    return fabs((double)got - want) / ulp;
}

typedef struct { double worst; float at; } Worst;

// Runs f over the floats with bit patterns lo_bits, lo_bits + step, ... up to hi_bits
// (non-negative floats, or both bounds negative and walked by magnitude), in vectors.
typedef vfloat (*VecFn)(vfloat);
typedef double (*RefFn)(double);

static Worst check_range(const char *name, VecFn f, RefFn ref, float lo, float hi, uint32_t step) {
    // walk each sign's half separately by bit pattern: magnitudes grow with the pattern
    Worst w = {0.0, 0.0f};
    float bounds[2][2] = {{lo < 0 ? 0.0f : lo, hi}, {hi < 0 ? -hi : 0.0f, lo < 0 ? -lo : -1.0f}};
    for (int sign = 0; sign < 2; sign++) {
        if (bounds[sign][1] < bounds[sign][0]) { continue; }
        uint32_t b0, b1;
        memcpy(&b0, &bounds[sign][0], 4);
        memcpy(&b1, &bounds[sign][1], 4);
        long count = ((long)b1 - b0) / step + 1;
        #pragma omp parallel
        {
            Worst mine = {0.0, 0.0f};
            #pragma omp for schedule(static)
            for (long k = 0; k < count; k += VEC_WIDTH) {
                vfloat x;
                for (int l = 0; l < VEC_WIDTH; l++) {
                    long kk = k + l < count ? k + l : count - 1;
                    uint32_t bits = (b0 + (uint32_t)(kk * step)) | (sign ? 0x80000000u : 0);
                    memcpy(&x[l], &bits, 4);
                }
                vfloat y = f(x);
                for (int l = 0; l < VEC_WIDTH; l++) {
                    double e = ulp_error(y[l], ref((double)x[l]));
                    if (!(e <= mine.worst)) { mine.worst = e; mine.at = x[l]; }
                }
            }
            #pragma omp critical
            if (!(mine.worst <= w.worst)) { w = mine; }
        }
    }
    printf("  %-34s worst %.3f ulp at x = %.9g\n", name, w.worst, w.at);
    return w;
}

// The floats (every one) on which f and g differ in any bit; prints the first.
static long count_differing(const char *name, VecFn f, VecFn g) {
    long differ = 0;
    uint32_t first = 0;
    #pragma omp parallel for reduction(+ : differ) schedule(static)
    for (long k = 0; k < (1L << 32); k += VEC_WIDTH) {
        vfloat x;
        for (int l = 0; l < VEC_WIDTH; l++) {
            const uint32_t bits = (uint32_t)(k + l);
            memcpy(&x[l], &bits, 4);
        }
        const vfloat a = f(x), b = g(x);
        if (memcmp(&a, &b, sizeof(a)) == 0) { continue; }
        for (int l = 0; l < VEC_WIDTH; l++) {
            if (memcmp(&a[l], &b[l], 4) != 0) {
                #pragma omp critical
                if (differ == 0 || (uint32_t)(k + l) < first) { first = (uint32_t)(k + l); }
                differ++;
            }
        }
    }
    float at;
    memcpy(&at, &first, 4);
    printf("  %-34s %ld floats differ%s", name, differ, differ ? "" : "\n");
    if (differ) { printf(", the first at bits 0x%08x (%.9g)\n", first, at); }
    return differ;
}

#pragma GCC diagnostic ignored "-Wpsabi"  // vectors by value, for a width forced past the target's
static vfloat v_exp(vfloat x) { return vec_exp(x); }
static vfloat v_exp_two_multiplies(vfloat x) { return vec_exp_two_multiplies(x); }
static vfloat v_sqrt(vfloat x) { return vec_sqrt(x); }
static vfloat v_gelu(vfloat x) { return gelu_vec(x); }
static vfloat v_gelu_grad(vfloat x) { return gelu_grad_vec(x); }

static double ref_gelu(double x) {
    return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
static double ref_gelu_grad(double x) {
    double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
    double th = tanh(u);
    double du = 0.79788456080286535588 * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
}

int main(void) {
    printf("vecmath: VEC_WIDTH %d, %s\n", VEC_WIDTH,
#ifdef __FMA__
           "with FMA"
#else
           "without FMA"
#endif
    );
    int fails = 0;
    fails += check_range("exp, [-104, 89] every 4th", v_exp, exp, -104.0f, 89.0f, 4).worst > MAX_ULP_EXP;
    fails += check_range("exp, [-1, 1] every float", v_exp, exp, -1.0f, 1.0f, 1).worst > MAX_ULP_EXP;
    fails += count_differing("exp = two multiplies", v_exp, v_exp_two_multiplies) != 0;
    fails += check_range("sqrt, [0, FLT_MAX] every 4th", v_sqrt, sqrt, 0x1p-126f, 3.4e38f, 4).worst > MAX_ULP_SQRT;
    ulp_floor = 1.0;
    fails += check_range("gelu, [-12, 12] every 4th", v_gelu, ref_gelu, -12.0f, 12.0f, 4).worst > MAX_ULP_GELU;
    fails += check_range("gelu', [-12, 12] every 4th", v_gelu_grad, ref_gelu_grad, -12.0f, 12.0f, 4).worst > MAX_ULP_GELU;
    printf("%s\n", fails ? "FAIL" : "OK");
    return fails ? 1 : 0;
}
