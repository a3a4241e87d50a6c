#!/usr/bin/python3
"""Universes whose answer is known, for the cross-spectrum baseline (docs/science.md, "The
strongest two-point baseline"): the four channels are one field at four times, differing only
by a growth factor, each seen through its own noise of unknown level.

    log counts of channel c = log K + a g(u)^c delta + s_c eps_c,   c = 0..3

delta and eps_c are independent white Gaussian fields of unit variance, a = 0.5, the growth
per step g(u) = 0.75 + 0.2 u reads the label u ~ U[-1, 1] (written as the first of four labels,
the other three drawn and unused: a CosmoFlow sample's four), and the noise level s_c ~ U[0, 0.6]
is drawn anew per channel and sample: the unknown shot noise of a tracer of unknown density.
The auto-spectra are flat, a^2 g^2c + s_c^2: the growth and the noise cannot be told apart in
them. The cross-spectra of two channels are a^2 g^(c+d) for every |k|: noise-free, they read u.
Counts are int16, K = 200.

usage: make_growth.py DIR N SEED [S]   (cf-synth cosmo --format npy's layout: *_data.npy, *_label.npy)
"""
import os
import sys

import numpy as np


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    S = int(sys.argv[4]) if len(sys.argv) == 5 else 16
    rng = np.random.default_rng(seed)
    os.makedirs(out, exist_ok=True)
    for i in range(n):
        y = rng.uniform(-1, 1, 4).astype(np.float32)
        g, a = 0.75 + 0.2 * y[0], 0.5
        delta = rng.standard_normal((S, S, S))
        x = np.empty((S, S, S, 4), np.int16)
        for c in range(4):
            s = rng.uniform(0, 0.6)
            x[..., c] = np.minimum(np.rint(200 * np.exp(a * g ** c * delta + s * rng.standard_normal((S, S, S)))), 32767)
        np.save(os.path.join(out, 'growth_%d_%06d_data.npy' % (seed, i)), x)
        np.save(os.path.join(out, 'growth_%d_%06d_label.npy' % (seed, i)), y)


if __name__ == '__main__':
    main()
