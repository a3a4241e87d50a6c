#!/usr/bin/python3
"""How much a synthetic CosmoFlow dataset can tell, without the CNN (README, 'How much the data
can tell', and the independent check of cf-eval --spectrum's features).  Each universe's four
power spectra (27 shells of |k| in grid units, one per redshift channel, of x / mean(x) - 1),
logged and standardised, optionally with the cross-spectra of the channel pairs, are fitted to the four labels
by a small MLP (PyTorch, Adam, 300 epochs); prints the validation MAE per parameter and overall,
and that of a linear fit for comparison.

usage: /usr/bin/python3 bench/ps_regressor.py [--log] [--octaves] [--cross] [--moments] [--budget] [--epochs=E]
       [--taper | --tukey=A] [--crop=N] [--dump=F.npy] TRAIN_DIR VAL_DIR
  --log      spectra of log(1 + x) minus its mean (what --log-ratio feeds the CNN) instead of x / mean(x) - 1
  --octaves  bands |k| in [1,2), [2,4), .., [S/2,S) (5 at S = 32) instead of unit shells; also
             prints the MAE with each octave pair left out (which scales carry the information)
  --cross    also the cross-correlation coefficient of every channel pair in every band (the
             same particles at two redshifts: their ratio per mode is the growth between them)
  --moments  also each channel's log variance, skewness and excess kurtosis (one-point moments)
  --dump=F   write the validation set's features to F.npy (to compare with cf-eval --spectrum-dump)
  --epochs=E the fit's epochs (12 with --budget, else 300)
  --budget   train as the demo trains the CNN: SGD momentum 0.9, LR 0.01, batch 8, 12 epochs,
             a 64-unit hidden layer and the tanh x 1.2 output, instead of Adam for 300 epochs
  --taper    multiply each volume by a 3-D Hann window before the FFT: the spectra of a
             windowed estimator, which cannot use the box's exact periodic modes (a CNN with
             local filters and zero padding cannot either; README, 'Where the network stops')
  --tukey=A  a Tukey window instead: flat, with cosine ramps over the fraction A of each axis
  --crop=N   cut every volume into its disjoint N^3 sub-volumes first (as cf-convert universe cuts
             a 512^3 simulation into 128^3 samples): samples that are not whole periodic boxes
  the directories hold cf-synth cosmo --format npy output, e.g.
  bin/cf-synth cosmo --out /tmp/ps-train --samples 2048 --seed 1 --size 32 --voxel 4 --fixed --spread 0.5 --format npy
  bin/cf-synth cosmo --out /tmp/ps-val --samples 512 --seed 2 --size 32 --voxel 4 --fixed --spread 0.5 --format npy
"""
import glob
import sys

import numpy as np
import torch


def load(d):
    xs = sorted(glob.glob(d + '/*_data.npy'))
    if not xs:
        sys.exit(f'ps_regressor: {d}: no *_data.npy files (cf-synth cosmo --format npy)')
    X = np.stack([np.load(f) for f in xs]).astype(np.float32)            # (N, S, S, S, 4)
    Y = np.stack([np.load(f.replace('_data', '_label')) for f in xs]).astype(np.float32)
    return X, Y


def sub_volumes(X, Y, n):
    """the disjoint n^3 sub-volumes of each (N, S, S, S, 4) volume, each with its volume's labels"""
    S = X.shape[1]
    parts = [X[:, i:i + n, j:j + n, k:k + n] for i in range(0, S - n + 1, n)
             for j in range(0, S - n + 1, n) for k in range(0, S - n + 1, n)]
    return np.concatenate(parts), np.concatenate([Y] * len(parts))


def window(S, taper):
    """1-D window of S points: Hann (taper 'hann') or Tukey with ramps over a fraction taper"""
    if taper == 'hann':
        return np.hanning(S + 2)[1:-1]
    n, w, r = np.arange(S) + 0.5, np.ones(S), taper * S / 2
    lo, hi = n < r, n > S - r
    w[lo] = 0.5 * (1 - np.cos(np.pi * n[lo] / r))
    w[hi] = 0.5 * (1 - np.cos(np.pi * (S - n[hi]) / r))
    return w


def pairs(C):
    """the channel pairs (c, d), c < d, in the order of the C estimator (tools/spectrum.h)"""
    return [(c, d) for c in range(C) for d in range(c + 1, C)]


def band_index(S, octaves):
    """each Fourier mode's band (-1: none) of a full S^3 FFT, and the number of bands: octaves
    [1,2), [2,4), .., [S/2,S), or unit shells [1,2), .., [B,B+1) with B = floor(S/2 sqrt 3)"""
    k = np.fft.fftfreq(S) * S
    kk = np.sqrt(k[:, None, None] ** 2 + k[None, :, None] ** 2 + k[None, None, :] ** 2)
    nb = int(np.ceil(np.log2(S))) if octaves else int(np.floor(S / 2 * np.sqrt(3)))
    b = np.full(kk.shape, -1)
    ok = kk >= 1
    b[ok] = np.floor(np.log2(kk[ok])) if octaves else np.floor(kk[ok]) - 1
    b[b >= nb] = -1
    return b, nb


def features(X, log, octaves, taper=None, cross=False, moments=False):
    """per sample, band-major: each band's C log powers log(mean |F_c|^2 + 1e-3), then with
    cross the correlation coefficient Re sum F_c F_d* / sqrt(sum |F_c|^2 sum |F_d|^2) of every
    channel pair; with moments, last, each channel's log variance, skewness and excess kurtosis.
    The full complex FFT, as the C estimator: its band means count every mode once."""
    if len(X) > 64:   # in chunks: the complex spectra of a whole 64^3 dataset would not fit in memory
        return np.concatenate([features(X[i:i + 64], log, octaves, taper, cross, moments) for i in range(0, len(X), 64)])
    S, C = X.shape[1], X.shape[4]
    if log:
        X = np.log1p(X.astype(np.float64))
        X = X - X.mean(axis=(1, 2, 3), keepdims=True)
    else:
        X = X / X.mean(axis=(1, 2, 3), keepdims=True) - 1
    one = []
    if moments:
        var = (X ** 2).mean(axis=(1, 2, 3))
        one = [np.log(var + 1e-6), (X ** 3).mean(axis=(1, 2, 3)) / (var ** 1.5 + 1e-12), (X ** 4).mean(axis=(1, 2, 3)) / (var ** 2 + 1e-12) - 3]
    if taper:
        w = window(S, taper)
        X = X * (w[:, None, None] * w[None, :, None] * w[None, None, :])[None, :, :, :, None]
    F = np.fft.fftn(X, axes=(1, 2, 3))
    band, nb = band_index(S, octaves)
    out = []
    for b in range(nb):
        Fb = F[:, band == b, :]                                     # (N, modes, C)
        P = (np.abs(Fb) ** 2).mean(axis=1) if Fb.shape[1] else np.zeros((len(X), C))   # (N, C)
        out.append(np.log(P + 1e-3))
        if cross:
            r = [(Fb[:, :, c] * Fb[:, :, d].conj()).real.mean(axis=1) / np.maximum(np.sqrt(P[:, c] * P[:, d]), 1e-300) if Fb.shape[1] else np.zeros(len(X))
                 for c, d in pairs(C)]
            out.append(np.stack(r, axis=1))
    if moments:   # channel-major like the C estimator: var, skew, kurt of channel 0, then 1, ..
        out.append(np.stack(one, axis=2).reshape(len(X), 3 * C))
    return np.concatenate(out, axis=1).astype(np.float32)


NAMES = ['Omega_m', 'sigma_8', 'n_s', 'H_0']


def fit(Ft, Yt, Fv, Yv, budget, epochs=None):
    """validation MAE per parameter of an MLP from standardised features to the labels"""
    mu, sd = Ft.mean(0), Ft.std(0) + 1e-6
    Ft, Fv = torch.tensor((Ft - mu) / sd).float(), torch.tensor((Fv - mu) / sd).float()
    Tt, Tv = torch.tensor(Yt), torch.tensor(Yv)
    torch.manual_seed(0)
    if budget:
        net = torch.nn.Sequential(torch.nn.Linear(Ft.shape[1], 64), torch.nn.LeakyReLU(0.3),
                                  torch.nn.Linear(64, 4), torch.nn.Tanh())
        opt, batch, gain = torch.optim.SGD(net.parameters(), 0.01, momentum=0.9), 8, 1.2
        epochs = epochs or 12
    else:
        net = torch.nn.Sequential(torch.nn.Linear(Ft.shape[1], 128), torch.nn.ReLU(),
                                  torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
        opt, batch, gain = torch.optim.Adam(net.parameters(), 1e-3, weight_decay=1e-4), 64, 1.0
        epochs = epochs or 300
    for _ in range(epochs):
        perm = torch.randperm(len(Ft))
        for i in range(0, len(Ft), batch):
            j = perm[i:i + batch]
            opt.zero_grad()
            loss = ((gain * net(Ft[j]) - Tt[j]) ** 2).mean()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return (gain * net(Fv) - Tv).abs().mean(0).numpy()


def show(name, e):
    print(f'{name:14s}' + ' '.join(f'{n} {v:.3f}' for n, v in zip(NAMES, e)) + f' mae {e.mean():.3f}')


def main():
    flags = [a for a in sys.argv[1:] if a.startswith('--')]
    dirs = [a for a in sys.argv[1:] if not a.startswith('--')]
    tukey = [f for f in flags if f.startswith('--tukey=')]
    crop = [f for f in flags if f.startswith('--crop=')]
    dump = [f for f in flags if f.startswith('--dump=')]
    epochs = [f for f in flags if f.startswith('--epochs=')]
    if len(dirs) != 2 or set(flags) - {'--log', '--octaves', '--budget', '--taper', '--cross', '--moments'} - set(tukey) - set(crop) - set(dump) - set(epochs):
        sys.exit(__doc__)
    log, octaves, budget = '--log' in flags, '--octaves' in flags, '--budget' in flags
    cross, moments = '--cross' in flags, '--moments' in flags
    taper = float(tukey[-1][8:]) if tukey else 'hann' if '--taper' in flags else None
    Xt, Yt = load(dirs[0])
    Xv, Yv = load(dirs[1])
    if crop:
        Xt, Yt = sub_volumes(Xt, Yt, int(crop[-1][7:]))
        Xv, Yv = sub_volumes(Xv, Yv, int(crop[-1][7:]))
    Ft, Fv = features(Xt, log, octaves, taper, cross, moments), features(Xv, log, octaves, taper, cross, moments)
    if dump:
        np.save(dump[-1][7:], Fv)
    show('mlp', fit(Ft, Yt, Fv, Yv, budget, int(epochs[-1][9:]) if epochs else None))
    mu, sd = Ft.mean(0), Ft.std(0) + 1e-6
    St, Sv = (Ft - mu) / sd, (Fv - mu) / sd
    W = np.linalg.lstsq(np.c_[St, np.ones(len(St))], Yt, rcond=None)[0]
    show('linear', np.abs(np.c_[Sv, np.ones(len(Sv))] @ W - Yv).mean(0))
    if octaves and not cross and not moments:   # columns are band-major: 4 channels per band
        for drop, name in (([0, 1], 'no |k|<4'), ([3, 4], 'no |k|>=8')):
            keep = [b * 4 + c for b in range(Ft.shape[1] // 4) if b not in drop for c in range(4)]
            show(name, fit(Ft[:, keep], Yt, Fv[:, keep], Yv, budget))


if __name__ == '__main__':
    main()
