/* The BSP FFT of Bisseling and Inda on LPF, written anew: n = p*m with p | m, x distributed
 * cyclically (x[s + p*t] on process s). Each process transforms its m elements locally,
 * multiplies by the twiddles w_n^(s*k1), and one superstep of puts redistributes so that
 * process r holds every process's values for k1 in its block; p-point DFTs then give
 * y[k1 + m*k2]. Checked against a direct O(n^2) DFT of the same input. */
#include <lpf/core.h>
#include <complex.h>
#include <math.h>
#include <string.h>
#include "check.h"

typedef double complex cplx;
static const double PI = 3.14159265358979323846;

/* Out-of-place DFT of x[0], x[stride], ... (m values) into y: radix 2 while even, direct
 * for the odd remainder. */
static void dft(const cplx *x, size_t stride, size_t m, cplx *y) {
    if (m % 2 == 0) {
        size_t h = m / 2;
        cplx *e = malloc(sizeof(cplx) * m), *o = e + h;
        dft(x, 2 * stride, h, e);
        dft(x + stride, 2 * stride, h, o);
        for (size_t k = 0; k < h; k++) {
            cplx t = cexp(-2.0 * PI * I * (double)k / (double)m) * o[k];
            y[k] = e[k] + t;
            y[k + h] = e[k] - t;
        }
        free(e);
        return;
    }
    for (size_t k = 0; k < m; k++) {
        cplx s = 0;
        for (size_t j = 0; j < m; j++)
            s += x[j * stride] * cexp(-2.0 * PI * I * (double)((j * k) % m) / (double)m);
        y[k] = s;
    }
}

static cplx input(size_t j) { /* deterministic, not symmetric */
    return sin(0.37 * (double)j) + 0.25 * (double)(j % 7) + I * cos(1.3 * (double)j * (double)j);
}

static void spmd(lpf_t ctx, lpf_pid_t s, lpf_pid_t p, lpf_args_t args) {
    size_t n = *(const size_t *)args.input; /* only pid 0 has it: broadcast below */
    (void)n;
    size_t nn = 0;
    lpf_resize_memory_register(ctx, 3);
    lpf_resize_message_queue(ctx, 2 * p);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    lpf_memslot_t sn;
    lpf_register_global(ctx, &nn, sizeof nn, &sn);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    if (s == 0) {
        nn = *(const size_t *)args.input;
        lpf_memslot_t src;
        lpf_register_local(ctx, &nn, sizeof nn, &src);
        for (lpf_pid_t q = 1; q < p; q++) lpf_put(ctx, src, 0, q, sn, 0, sizeof nn, LPF_MSG_DEFAULT);
        lpf_sync(ctx, LPF_SYNC_DEFAULT);
        lpf_deregister(ctx, src);
    } else {
        lpf_sync(ctx, LPF_SYNC_DEFAULT);
    }
    lpf_deregister(ctx, sn);
    size_t m = nn / p, b = m / p;
    cplx *x = malloc(sizeof(cplx) * m), *z = malloc(sizeof(cplx) * m), *w = malloc(sizeof(cplx) * m);
    for (size_t t = 0; t < m; t++) x[t] = input(s + p * t);
    dft(x, 1, m, z);
    for (size_t k1 = 0; k1 < m; k1++)
        z[k1] *= cexp(-2.0 * PI * I * (double)((s * k1) % nn) / (double)nn);
    lpf_memslot_t sz, sw;
    lpf_register_local(ctx, z, sizeof(cplx) * m, &sz);
    lpf_register_global(ctx, w, sizeof(cplx) * m, &sw);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    /* Block r of z goes to process r, at position s of its p blocks. */
    for (lpf_pid_t r = 0; r < p; r++)
        lpf_put(ctx, sz, sizeof(cplx) * b * r, r, sw, sizeof(cplx) * b * s, sizeof(cplx) * b, LPF_MSG_DEFAULT);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "redistribution");
    /* w[q*b + i] = z_q[r*b + i]: a p-point DFT over q for each i gives y[r*b + i + m*k2]. */
    double err = 0, scale = 0;
    cplx *col = malloc(sizeof(cplx) * p), *out = malloc(sizeof(cplx) * p);
    for (size_t i = 0; i < b; i++) {
        for (lpf_pid_t q = 0; q < p; q++) col[q] = w[q * b + i];
        dft(col, 1, p, out);
        for (lpf_pid_t k2 = 0; k2 < p; k2++) {
            size_t k = s * b + i + m * k2;
            cplx ref = 0;
            for (size_t j = 0; j < nn; j++)
                ref += input(j) * cexp(-2.0 * PI * I * (double)((j * k) % nn) / (double)nn);
            err = fmax(err, cabs(out[k2] - ref));
            scale = fmax(scale, cabs(ref));
        }
    }
    CHECK(err <= 1e-9 * scale * log2((double)nn), "pid %u: max error %g (scale %g)", s, err, scale);
    lpf_deregister(ctx, sz);
    lpf_deregister(ctx, sw);
    free(x); free(z); free(w); free(col); free(out);
}

int main(void) {
    unsigned p = env_procs();
    size_t n = (size_t)p * p * 64; /* p^2 divides n */
    lpf_args_t a = {&n, sizeof n, NULL, 0, NULL, 0};
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, a) == LPF_SUCCESS, "exec");
    return failures();
}
