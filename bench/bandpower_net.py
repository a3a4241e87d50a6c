#!/usr/bin/python3
"""A learnable band-power network against the demo's data (README, 'Where the network stops').
The power-spectrum regressor's features rebuilt from network layers: each of four branches is
a linear 3^3 convolution (4 -> F channels, no bias) of the log-ratio input, squared, averaged
over the volume and logged; the 4F log band powers go to the CNN's own head (dense 64 leaky
0.3, dense 4 tanh x 1.2).  Branch j either sees the input average-pooled j times ('pool') or
convolves it at dilation 2^j at full resolution ('dilate': no subsampling, so with circular
padding each branch's mean square is exactly a weighted sum of the box's periodic mode powers,
as in an FFT).  Trained as the demo trains: SGD momentum 0.9, batch 8, MSE, LR x 0.2 for the
last fifth of the epochs.  Prints per epoch the training loss and validation MAE (overall,
Omega_m, sigma_8, n_s, H_0).

usage: /usr/bin/python3 bench/bandpower_net.py TRAIN_DIR VAL_DIR [pool|dilate] [zeros|circular]
                                               [--bn] [--filters F] [--lr X] [--epochs E]
  the directories hold cf-synth cosmo --format npy output (the demo's kind:
  --size 32 --voxel 4 --fixed --spread 0.5); --bn: batch norm on the 4F log powers
"""
import glob
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as Fn


def load(d):
    """log(1 + x) - log(1 + mean count per channel) (cf-train --log-ratio), NCDHW"""
    xs = sorted(glob.glob(d + '/*_data.npy'))
    if not xs:
        sys.exit(f'bandpower_net: {d}: no *_data.npy files (cf-synth cosmo --format npy)')
    X = np.stack([np.load(f) for f in xs]).astype(np.float32)
    Y = np.stack([np.load(f.replace('_data', '_label')) for f in xs]).astype(np.float32)
    X = np.log1p(X) - np.log1p(X.mean(axis=(1, 2, 3), keepdims=True))
    return torch.tensor(X).permute(0, 4, 1, 2, 3).contiguous(), torch.tensor(Y)


class BandPower(nn.Module):
    def __init__(self, branches, pad, filters, bn):
        super().__init__()
        self.dilate = branches == 'dilate'
        self.convs = nn.ModuleList([nn.Conv3d(4, filters, 3, padding=2 ** j if self.dilate else 1,
                                              dilation=2 ** j if self.dilate else 1, padding_mode=pad,
                                              bias=False) for j in range(4)])
        self.norm = nn.BatchNorm1d(4 * filters) if bn else None
        self.head = nn.Sequential(nn.Linear(4 * filters, 64), nn.LeakyReLU(0.3), nn.Linear(64, 4), nn.Tanh())

    def forward(self, x):
        f = []
        for j, conv in enumerate(self.convs):
            if j and not self.dilate:
                x = Fn.avg_pool3d(x, 2)
            f.append(torch.log(conv(x).pow(2).mean(dim=(2, 3, 4)) + 1e-4))
        f = torch.cat(f, 1)
        return 1.2 * self.head(self.norm(f) if self.norm is not None else f)


def main():
    args = sys.argv[1:]
    opt = {'--filters': 8, '--lr': 0.01, '--epochs': 8}
    for k in list(opt):
        if k in args:
            i = args.index(k)
            opt[k] = type(opt[k])(args[i + 1])
            del args[i:i + 2]
    bn = '--bn' in args
    args = [a for a in args if a != '--bn']
    if len(args) < 2 or any(a.startswith('--') for a in args):
        sys.exit(__doc__)
    branches = args[2] if len(args) > 2 else 'pool'
    pad = args[3] if len(args) > 3 else 'zeros'
    torch.set_num_threads(1)
    Xt, Yt = load(args[0])
    Xv, Yv = load(args[1])
    torch.manual_seed(0)
    net = BandPower(branches, pad, opt['--filters'], bn)
    sgd = torch.optim.SGD(net.parameters(), opt['--lr'], momentum=0.9)
    E = opt['--epochs']
    for ep in range(E):
        t, tl = time.time(), 0.0
        if ep == int(E * 0.8):
            for g in sgd.param_groups:
                g['lr'] *= 0.2
        net.train()
        perm = torch.randperm(len(Xt))
        for i in range(0, len(Xt), 8):
            j = perm[i:i + 8]
            sgd.zero_grad()
            loss = ((net(Xt[j]) - Yt[j]) ** 2).mean()
            loss.backward()
            sgd.step()
            tl += loss.item() * len(j)
        net.eval()
        with torch.no_grad():
            e = (net(Xv) - Yv).abs().mean(0).numpy()
        print(f'epoch {ep + 1} train_loss {tl / len(Xt):.4f} val_mae {e.mean():.3f} (' +
              ' '.join(f'{v:.3f}' for v in e) + f') {time.time() - t:.1f} s', flush=True)


if __name__ == '__main__':
    main()
