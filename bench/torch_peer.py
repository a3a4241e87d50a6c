#!/usr/bin/python3
"""The PyTorch peer of cf-bench: builds the same network from one of our cfg files (the
CosmoFlow layer set: conv, maxpool, avgpool, flatten, dense, dropout, activation, scale),
runs training steps (forward, MSE, backward, momentum SGD) with the same batch and threads,
or, for models/deepcam.cfg, the reference DeepLabv3+ (tests/torch_deeplab.py) with the
weighted cross-entropy and AdamW (PyTorch has no LAMB; both are one elementwise pass or two
over the parameters), and prints the same last line as cf-bench:
  samples_per_s X gflops_per_s Y sgemm_peak_pct 0 peak_rss_mb R
Run by bench/run.sh (make bench); needs Debian's python3-torch."""
import argparse, os, resource, sys, time
import torch, torch.nn as nn, torch.nn.functional as F

def parse_cfg(path):
    secs = []
    for line in open(path):
        line = line.split("#")[0].strip()
        if not line:
            continue
        if line.startswith("["):
            secs.append((line[1:-1], {}))
        else:
            k, v = line.split("=", 1)
            secs[-1][1][k.strip()] = v.strip()
    return secs

class Net(nn.Module):
    def __init__(self, secs, shape):
        super().__init__()
        c, d, h, w = shape
        self.ops, self.flops = [], 0.0
        mods = nn.ModuleList()
        for kind, kv in secs[1:]:
            if kind == "conv":
                k, f = int(kv.get("size", 1)), int(kv["filters"])
                pad = kv.get("pad", "valid")
                conv = nn.Conv3d(c, f, k)
                mods.append(conv)
                lo, hi = ((k - 1) // 2, k - 1 - (k - 1) // 2) if pad == "same" else (0, 0)
                self.ops.append(("conv", conv, (lo, hi, lo, hi, lo, hi), kv))
                d, h, w = d + lo + hi - k + 1, h + lo + hi - k + 1, w + lo + hi - k + 1
                self.flops += 2.0 * c * k ** 3 * f * d * h * w
                c = f
            elif kind in ("maxpool", "avgpool"):
                k = int(kv.get("size", 2))
                self.ops.append((kind, k, None, kv)); d, h, w = d // k, h // k, w // k
            elif kind == "flatten":
                self.ops.append(("flatten", None, None, kv)); c, d, h, w = c * d * h * w, 1, 1, 1
            elif kind == "dense":
                o = int(kv["outputs"]); lin = nn.Linear(c, o); mods.append(lin)
                self.ops.append(("dense", lin, None, kv)); self.flops += 2.0 * c * o; c = o
            elif kind == "dropout":
                self.ops.append(("dropout", float(kv.get("rate", 0.5)), None, kv))
            elif kind == "scale":
                self.ops.append(("scale", float(kv.get("factor", 1)), None, kv))
            elif kind == "activation":
                self.ops.append(("act", None, None, kv))
            else:
                sys.exit("torch_peer: section [%s] is not in the CosmoFlow layer set" % kind)
        self.mods = mods

    @staticmethod
    def act(x, kv):
        a = kv.get("activation", "linear")
        if a == "leaky": return F.leaky_relu(x, float(kv["slope"]))
        if a == "relu": return F.relu(x)
        if a == "tanh": return torch.tanh(x)
        return x

    def forward(self, x):
        for kind, m, pad, kv in self.ops:
            if kind == "conv": x = self.act(m(F.pad(x, pad)), kv)
            elif kind == "maxpool": x = F.max_pool3d(x, m)
            elif kind == "avgpool": x = F.avg_pool3d(x, m)
            elif kind == "flatten": x = x.reshape(x.shape[0], -1)
            elif kind == "dense": x = self.act(m(x), kv)
            elif kind == "dropout": x = F.dropout(x, m, self.training)
            elif kind == "scale": x = x * m
            elif kind == "act": x = self.act(x, kv)
        return x

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="models/cosmoflow.cfg")
ap.add_argument("--input-shape")
ap.add_argument("--batch", type=int, default=1)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
torch.set_num_threads(a.threads)
secs = parse_cfg(a.model)
shape = [int(v) for v in (a.input_shape or secs[0][1]["input"]).split("x")]
if os.path.basename(a.model) == "deepcam.cfg":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from torch_deeplab import DeepLab
    net = DeepLab()
    c, h, w = shape
    # forward FLOPs from cf-check's count at 768x1152 (655.93 GFLOP), scaled by the area
    net.flops = 655.93e9 * h * w / (768 * 1152)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-6, eps=1e-6, weight_decay=0.01)
    x = torch.rand(a.batch, *shape)
    t = torch.randint(0, 3, (a.batch, h, w))
    wc = torch.tensor([0.986267818390377, 0.0004578708870701058, 0.01327431072255291]) ** -0.125
    loss_fn = lambda y: torch.mean(F.cross_entropy(y, t, weight=wc, reduction="none"))
else:
    net = Net(secs, shape)
    opt = torch.optim.SGD(net.parameters(), lr=1e-6, momentum=0.9)
    x = torch.rand(a.batch, *shape)
    t = torch.rand(a.batch, 4) * 2 - 1
    loss_fn = lambda y: F.mse_loss(y, t)
net.train()
for i in range(a.steps + 1):
    if i == 1:
        t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss_fn(net(x)).backward()
    opt.step()
dt = (time.perf_counter() - t0) / a.steps
fl = 3 * net.flops * a.batch
print("pytorch %s %s batch %d: %.3f s/step" % (torch.__version__, a.model, a.batch, dt))
print("samples_per_s %.4f gflops_per_s %.1f sgemm_peak_pct 0 peak_rss_mb %.0f" %
      (a.batch / dt, fl / dt / 1e9, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
