#!/usr/bin/python3
"""The PyTorch peer of cf-bench: builds the same network from one of our cfg files (the
CosmoFlow layer set: conv, maxpool, avgpool, flatten, dense, dropout, activation, scale),
runs training steps (forward, MSE, backward, momentum SGD) with the same batch and threads,
or, for models/deepcam.cfg, the reference DeepLabv3+ (tests/torch_deeplab.py) with the
weighted cross-entropy and AdamW (PyTorch has no LAMB; both are one elementwise pass or two
over the parameters), and prints the same last line as cf-bench, and its first convolution's rate alone:
  samples_per_s X gflops_per_s Y sgemm_peak_pct 0 peak_rss_mb R first_conv_gflops C
Padding is passed to the convolutions, and the faster of the contiguous and channels-last
memory formats is kept, so that the peer is shown at its best.
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
                lo, hi = ((k - 1) // 2, k - 1 - (k - 1) // 2) if pad == "same" else (0, 0)
                # symmetric padding inside Conv3d (no copy of the input); an even kernel's
                # 'same' padding is asymmetric and needs F.pad
                conv = nn.Conv3d(c, f, k, padding=lo if lo == hi else 0)
                mods.append(conv)
                self.ops.append(("conv", conv, None if lo == hi else (lo, hi, lo, hi, lo, hi), kv))
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
            if kind == "conv": x = self.act(m(x if pad is None else F.pad(x, pad)), kv)
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
ap.add_argument("--memory-format", choices=["contiguous", "channels_last", "probe"], default="contiguous",
                help="probe: time one step in each format and print 'best_format NAME'")
ap.add_argument("--bf16", action="store_true", help="the step under CPU autocast to bfloat16 (fp32 weights, as cf-bench --precision bf16)")
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

def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
        y = net(x)
    loss_fn(y.float()).backward()
    opt.step()

def first_conv_rate():
    """GFLOP/s of the network's first convolution alone (forward, median of 5), on the input
    it gets in the network: how well this PyTorch build runs a convolution on this machine"""
    conv = next(m for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Conv3d)))
    seen = []
    h = conv.register_forward_hook(lambda m, i, o: seen.append((i[0].detach(), o.shape)))
    with torch.no_grad():
        net(x)
    h.remove()
    inp, out = seen[0]
    k = 1
    for s in conv.kernel_size:
        k *= s
    fl = 2.0 * conv.in_channels // conv.groups * k * out.numel()
    ts = []
    with torch.no_grad():
        for _ in range(6):
            t0 = time.perf_counter(); conv(inp); ts.append(time.perf_counter() - t0)
    return fl / sorted(ts[1:])[2] / 1e9

formats = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last_3d if x.dim() == 5 else torch.channels_last}
if a.memory_format == "probe":
    # the faster of the two memory formats (a warm-up step and one timed step each), in a
    # process of its own so that the measured run's peak memory is that of one format
    times = {}
    for name, fmt in formats.items():
        net.to(memory_format=fmt); x = x.contiguous(memory_format=fmt)
        step()
        t0 = time.perf_counter(); step(); times[name] = time.perf_counter() - t0
    print("best_format %s (%s)" % (min(times, key=times.get), ", ".join("%s %.3f s" % kv for kv in times.items())))
    sys.exit(0)
best = (a.memory_format, 0, formats[a.memory_format])
net.to(memory_format=best[2]); x = x.contiguous(memory_format=best[2])
conv_rate = first_conv_rate()
t0 = time.perf_counter()
for i in range(a.steps):
    step()
dt = (time.perf_counter() - t0) / a.steps
fl = 3 * net.flops * a.batch
print("pytorch %s %s batch %d, %s%s: %.3f s/step; first convolution %.1f GFLOP/s" % (torch.__version__, a.model, a.batch, best[0], ", bf16 autocast" if a.bf16 else "", dt, conv_rate))
print("samples_per_s %.4f gflops_per_s %.1f sgemm_peak_pct 0 peak_rss_mb %.0f first_conv_gflops %.1f" %
      (a.batch / dt, fl / dt / 1e9, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, conv_rate))
