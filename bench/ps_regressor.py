#!/usr/bin/python3
"""How much a synthetic CosmoFlow dataset can tell, without the CNN (README, 'How much the data
can tell').  Each universe's four power spectra (27 shells of |k| in grid units, one per
redshift channel, of x / mean(x) - 1), logged and standardised, are fitted to the four labels
by a small MLP (PyTorch, Adam, 300 epochs); prints the validation MAE per parameter and overall,
and that of a linear fit for comparison.

usage: /usr/bin/python3 bench/ps_regressor.py TRAIN_DIR VAL_DIR
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


def features(X):
    S = X.shape[1]
    X = X / X.mean(axis=(1, 2, 3), keepdims=True) - 1
    P = np.abs(np.fft.rfftn(X, axes=(1, 2, 3))) ** 2
    k, kr = np.fft.fftfreq(S) * S, np.fft.rfftfreq(S) * S
    kk = np.sqrt(k[:, None, None] ** 2 + k[None, :, None] ** 2 + kr[None, None, :] ** 2)
    bins = np.arange(1, S // 2 * np.sqrt(3) + 2, 1.0)
    shell = np.digitize(kk, bins)
    out = [np.log(P[:, shell == b, :].mean(axis=1) + 1e-3) for b in range(1, len(bins)) if (shell == b).any()]
    return np.concatenate(out, axis=1)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    Xt, Yt = load(sys.argv[1])
    Xv, Yv = load(sys.argv[2])
    Ft, Fv = features(Xt), features(Xv)
    mu, sd = Ft.mean(0), Ft.std(0) + 1e-6
    Ft, Fv = torch.tensor((Ft - mu) / sd).float(), torch.tensor((Fv - mu) / sd).float()
    Tt, Tv = torch.tensor(Yt), torch.tensor(Yv)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(Ft.shape[1], 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
    opt = torch.optim.Adam(net.parameters(), 1e-3, weight_decay=1e-4)
    for _ in range(300):
        perm = torch.randperm(len(Ft))
        for i in range(0, len(Ft), 64):
            j = perm[i:i + 64]
            opt.zero_grad()
            loss = ((net(Ft[j]) - Tt[j]) ** 2).mean()
            loss.backward()
            opt.step()
    with torch.no_grad():
        e = (net(Fv) - Tv).abs().mean(0).numpy()
    names = ['Omega_m', 'sigma_8', 'n_s', 'H_0']
    print('mlp    ' + ' '.join(f'{n} {v:.3f}' for n, v in zip(names, e)) + f' mae {e.mean():.3f}')
    W = np.linalg.lstsq(np.c_[Ft.numpy(), np.ones(len(Ft))], Yt, rcond=None)[0]
    el = np.abs(np.c_[Fv.numpy(), np.ones(len(Fv))] @ W - Yv).mean(0)
    print('linear ' + ' '.join(f'{n} {v:.3f}' for n, v in zip(names, el)) + f' mae {el.mean():.3f}')


if __name__ == '__main__':
    main()
