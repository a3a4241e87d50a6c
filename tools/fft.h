/* A plain radix-2 complex FFT (double precision), in place: what cf-synth's lognormal fields
   and cf-eval's power-spectrum estimator need, without a dependency.  Sizes are powers of 2 up
   to 1024.  sign -1: forward, +1: inverse without the 1/N (the caller divides). */
#ifndef CF_TOOLS_FFT_H
#define CF_TOOLS_FFT_H
#include <math.h>
#include <stddef.h>
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
TOOL_UNUSED static void fft1(double *re, double *im, int n, size_t stride, int sign) {
    int i, j, len;
    double tw_re[512], tw_im[512];   /* n <= 1024 (--size) */
    for (i = 1, j = 0; i < n; i++) {   /* bit reversal */
        int bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
            double t = re[i * stride]; re[i * stride] = re[j * stride]; re[j * stride] = t;
            t = im[i * stride]; im[i * stride] = im[j * stride]; im[j * stride] = t;
        }
    }
    for (len = 2; len <= n; len <<= 1) {
        double ang = sign * 2 * M_PI / len;
        for (j = 0; j < len / 2; j++) { tw_re[j] = cos(ang * j); tw_im[j] = sin(ang * j); }  /* twiddles once per stage */
        for (i = 0; i < n; i += len) for (j = 0; j < len / 2; j++) {
            double wr = tw_re[j], wi = tw_im[j];
            size_t a = (size_t)(i + j) * stride, b = (size_t)(i + j + len / 2) * stride;
            double xr = re[b] * wr - im[b] * wi, xi = re[b] * wi + im[b] * wr;
            re[b] = re[a] - xr; im[b] = im[a] - xi;
            re[a] += xr; im[a] += xi;
        }
    }
}
/* 3-D FFT of an S^3 complex array, axis by axis */
TOOL_UNUSED static void fft3(double *re, double *im, int S, int sign) {
    size_t S2 = (size_t)S * S, a, b;
    for (a = 0; a < S2; a++) fft1(re + a * S, im + a * S, S, 1, sign);                        /* x */
    for (a = 0; a < (size_t)S; a++) for (b = 0; b < (size_t)S; b++) fft1(re + a * S2 + b, im + a * S2 + b, S, S, sign); /* y */
    for (a = 0; a < S2; a++) fft1(re + a, im + a, S, S2, sign);                              /* z */
}

#endif
