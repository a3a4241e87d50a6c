#!/usr/bin/python3
"""How much a synthetic CosmoFlow dataset can tell, without the CNN (README, 'How much the data
can tell').  Each universe's four power spectra (27 shells of |k| in grid units, one per
redshift channel, of x / mean(x) - 1), logged and standardised, are fitted to the four labels
by a small MLP (PyTorch, Adam, 300 epochs); prints the validation MAE per parameter and overall,
and that of a linear fit for comparison.

usage: /usr/bin/python3 bench/ps_regressor.py [--log] [--octaves] [--budget] [--taper | --tukey=A] [--crop=N] TRAIN_DIR VAL_DIR
  --log      spectra of log(1 + x) minus its mean (what --log-ratio feeds the CNN) instead of x / mean(x) - 1
  --octaves  bands |k| in [1,2), [2,4), .., [S/2,S) (5 at S = 32) instead of unit shells; also
             prints the MAE with each octave pair left out (which scales carry the information)
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


def features(X, log, octaves, taper=None):
    if len(X) > 64:   # in chunks: the complex spectra of a whole 64^3 dataset would not fit in memory
        return np.concatenate([features(X[i:i + 64], log, octaves, taper) for i in range(0, len(X), 64)])
    S = X.shape[1]
    if log:
        X = np.log1p(X)
        X = X - X.mean(axis=(1, 2, 3), keepdims=True)
    else:
        X = X / X.mean(axis=(1, 2, 3), keepdims=True) - 1
    if taper:
        w = window(S, taper)
        X = X * (w[:, None, None] * w[None, :, None] * w[None, None, :])[None, :, :, :, None]
    P = np.abs(np.fft.rfftn(X, axes=(1, 2, 3))) ** 2
    k, kr = np.fft.fftfreq(S) * S, np.fft.rfftfreq(S) * S
    kk = np.sqrt(k[:, None, None] ** 2 + k[None, :, None] ** 2 + kr[None, None, :] ** 2)
    bins = 2.0 ** np.arange(0, int(np.log2(S)) + 1) if octaves else np.arange(1, S // 2 * np.sqrt(3) + 2, 1.0)   # octaves 1, 2, .., S
    shell = np.digitize(kk, bins)
    out = [np.log(P[:, shell == b, :].mean(axis=1) + 1e-3) for b in range(1, len(bins)) if (shell == b).any()]
    return np.concatenate(out, axis=1)


NAMES = ['Omega_m', 'sigma_8', 'n_s', 'H_0']


def fit(Ft, Yt, Fv, Yv, budget):
    """validation MAE per parameter of an MLP from standardised features to the labels"""
    mu, sd = Ft.mean(0), Ft.std(0) + 1e-6
    Ft, Fv = torch.tensor((Ft - mu) / sd).float(), torch.tensor((Fv - mu) / sd).float()
    Tt, Tv = torch.tensor(Yt), torch.tensor(Yv)
    torch.manual_seed(0)
    if budget:
        net = torch.nn.Sequential(torch.nn.Linear(Ft.shape[1], 64), torch.nn.LeakyReLU(0.3),
                                  torch.nn.Linear(64, 4), torch.nn.Tanh())
        opt, epochs, batch, gain = torch.optim.SGD(net.parameters(), 0.01, momentum=0.9), 12, 8, 1.2
    else:
        net = torch.nn.Sequential(torch.nn.Linear(Ft.shape[1], 128), torch.nn.ReLU(),
                                  torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
        opt, epochs, batch, gain = torch.optim.Adam(net.parameters(), 1e-3, weight_decay=1e-4), 300, 64, 1.0
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
    if len(dirs) != 2 or set(flags) - {'--log', '--octaves', '--budget', '--taper'} - set(tukey) - set(crop):
        sys.exit(__doc__)
    log, octaves, budget = '--log' in flags, '--octaves' in flags, '--budget' in flags
    taper = float(tukey[-1][8:]) if tukey else 'hann' if '--taper' in flags else None
    Xt, Yt = load(dirs[0])
    Xv, Yv = load(dirs[1])
    if crop:
        Xt, Yt = sub_volumes(Xt, Yt, int(crop[-1][7:]))
        Xv, Yv = sub_volumes(Xv, Yv, int(crop[-1][7:]))
    Ft, Fv = features(Xt, log, octaves, taper), features(Xv, log, octaves, taper)
    show('mlp', fit(Ft, Yt, Fv, Yv, budget))
    mu, sd = Ft.mean(0), Ft.std(0) + 1e-6
    St, Sv = (Ft - mu) / sd, (Fv - mu) / sd
    W = np.linalg.lstsq(np.c_[St, np.ones(len(St))], Yt, rcond=None)[0]
    show('linear', np.abs(np.c_[Sv, np.ones(len(Sv))] @ W - Yv).mean(0))
    if octaves:   # columns are band-major: 4 channels per band
        for drop, name in (([0, 1], 'no |k|<4'), ([3, 4], 'no |k|>=8')):
            keep = [b * 4 + c for b in range(Ft.shape[1] // 4) if b not in drop for c in range(4)]
            show(name, fit(Ft[:, keep], Yt, Fv[:, keep], Yv, budget))


if __name__ == '__main__':
    main()
