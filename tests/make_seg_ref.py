#!/usr/bin/python3
"""Writes the PyTorch reference for tests/ref/seg-layers.cfg into tests/ref/seg_ref/: weights
(our interchange names, PyTorch layouts), input, labels, and for batch norm in train mode and
in eval mode the output, the weighted softmax cross-entropy and every gradient; the running
statistics after one train-mode forward; the weights after 5 AdamW steps (torch.optim.AdamW),
5 Adam steps with L2 in the gradient (torch.optim.Adam, weight_decay), the same with gradient lag 1
(6 steps, 5 updates: Adam's step count from the updates), 5 steps of LARC (clip mode,
eta 0.002, the 2018 climate code) before torch.optim.Adam, and 5 LAMB steps with weight decay
0.01 and 5 with weight decay 0.  LAMB is not in PyTorch: the steps below follow NVIDIA apex
FusedLAMB (csrc/multi_tensor_lamb.cu) line by line, written independently of the C code.  Apex
differs from the LAMB paper (You et al. 2019) in one case: without weight decay (and without
use_nvlamb) its trust ratio is 1, the update plain Adam's; the paper scales by |w|/|u| always.
Float64, so the C float32 results are compared with exact values.
Run: /usr/bin/python3 tests/make_seg_ref.py   (Debian python3-torch, python3-numpy)."""
import os, numpy as np, torch, torch.nn.functional as F

torch.manual_seed(1)
out = os.path.join(os.path.dirname(__file__), "ref", "seg_ref")
for d in ("", "weights", "grad_train", "grad_eval", "after_adamw", "after_lamb", "after_lamb_wd0", "stats_train", "after_adam", "after_larc_adam",
          "after_adam_lag"):
    os.makedirs(os.path.join(out, d), exist_ok=True)
dt = torch.float64
B = 2
W_CLASS = torch.tensor([0.986267818390377, 0.0004578708870701058, 0.01327431072255291], dtype=dt) ** -0.125
LR, WD, BETAS, EPS, MAX_NORM = 0.01, 0.01, (0.9, 0.999), 1e-6, 1.0   # norms ~2: clipping active

def r(*shape, scale):
    return (torch.rand(*shape, dtype=dt) * 2 - 1) * scale
# (cfg layer, kind, tensor) in the C network order (cf_net_tensors)
params = [
    (0, "weight", r(6, 4, 3, 3, scale=0.4)),
    (1, "gamma", 1 + r(6, scale=0.3)), (1, "beta", r(6, scale=0.2)),
    (1, "running_mean", r(6, scale=0.5)), (1, "running_var", 1 + r(6, scale=0.5)),
    (2, "weight", r(6, 1, 3, 3, scale=0.5)),
    (3, "weight", r(8, 3, 1, 1, scale=0.5)),
    (5, "weight", 1 + r(8, scale=0.3)), (5, "bias", r(8, scale=0.2)),
    (8, "weight", r(16, 5, 3, 3, scale=0.3)),
    (9, "gamma", 1 + r(5, scale=0.3)), (9, "beta", r(5, scale=0.2)),
    (9, "running_mean", r(5, scale=0.5)), (9, "running_var", 1 + r(5, scale=0.5)),
    (11, "weight", r(5, 6, 1, 1, scale=0.5)),
    (13, "weight", r(3, 5, 1, 1, scale=0.6)), (13, "bias", r(3, scale=0.2)),
]
name = lambda i, l, k: "%03d_%d_%s.npy" % (i, l, k)
for i, (l, k, t) in enumerate(params):
    np.save(os.path.join(out, "weights", name(i, l, k)), t.numpy().astype(np.float32))
x = (torch.rand(B, 4, 8, 10, dtype=dt) * 2 - 1).numpy().astype(np.float32)
y = torch.randint(0, 3, (B, 8, 10)).numpy().astype(np.float32)
np.save(os.path.join(out, "input.npy"), x)
np.save(os.path.join(out, "labels.npy"), y)
x = torch.tensor(x, dtype=dt); y = torch.tensor(y, dtype=dt).long()

def load():
    return [torch.tensor(np.load(os.path.join(out, "weights", name(i, l, k))), dtype=dt) for i, (l, k, _) in enumerate(params)]
TRAINABLE = [i for i, (_, k, _) in enumerate(params) if not k.startswith("running")]

def forward(w, train):
    bn = lambda h, i: F.batch_norm(h, w[i + 2], w[i + 3], w[i], w[i + 1], training=train, momentum=0.1, eps=1e-5)
    h0 = F.conv2d(x, w[0], padding=1)
    h1 = F.relu(bn(h0, 1))
    h2 = F.conv2d(h1, w[5], padding=2, dilation=2, groups=6)
    h3 = F.conv2d(h2, w[6], stride=2, groups=2)
    h5 = F.relu(h3.mean((2, 3), keepdim=True) * w[7].view(1, -1, 1, 1) + w[8].view(1, -1, 1, 1))
    h6 = h5.expand(-1, -1, h3.shape[2], h3.shape[3])        # the image-pool broadcast
    h7 = torch.cat([h3, h6], 1)
    h8 = F.conv_transpose2d(h7, w[9], stride=2, padding=1, output_padding=1)
    h9 = bn(h8, 10)
    h11 = F.conv2d(h1, w[14])
    return F.conv2d(h9 + h11, w[15], w[16])

def loss_of(z):   # the reference's mean over all pixels of w[y] * CE
    return torch.mean(F.cross_entropy(z, y, weight=W_CLASS, reduction="none"))

for mode in ("train", "eval"):
    w = load()
    for i in TRAINABLE: w[i].requires_grad_(True)
    z = forward(w, mode == "train")
    L = loss_of(z)
    L.backward()
    np.save(os.path.join(out, "output_%s.npy" % mode), z.detach().numpy().astype(np.float32))
    open(os.path.join(out, "loss_%s.txt" % mode), "w").write("%.12g\n" % L.item())
    for i in TRAINABLE:
        l, k, _ = params[i]
        np.save(os.path.join(out, "grad_" + mode, name(i, l, k)), w[i].grad.numpy().astype(np.float32))
    if mode == "train":
        for i, (l, k, _) in enumerate(params):
            if k.startswith("running"):
                np.save(os.path.join(out, "stats_train", name(i, l, k)), w[i].numpy().astype(np.float32))

def grads(w):
    for i in TRAINABLE: w[i].grad = None
    loss_of(forward(w, True)).backward()
    return [w[i].grad for i in TRAINABLE]

# 5 AdamW steps: torch.optim.AdamW itself
w = load()
for i in TRAINABLE: w[i].requires_grad_(True)
opt = torch.optim.AdamW([w[i] for i in TRAINABLE], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
for step in range(5):
    opt.zero_grad(); grads(w); opt.step()
for i in TRAINABLE:
    l, k, _ = params[i]
    np.save(os.path.join(out, "after_adamw", name(i, l, k)), w[i].detach().numpy().astype(np.float32))

# 5 LAMB steps, apex FusedLAMB semantics (adam_w_mode, bias correction, grad averaging), with
# the weight decay WD and without: apex applies the trust ratio |w|/|u| only when the decay is
# not 0 (multi_tensor_lamb.cu, stage 2: "if (use_nvlamb || decay != 0)"), else the ratio is 1
def lamb(wd, sub):
    w = load()
    for i in TRAINABLE: w[i].requires_grad_(True)
    m = {i: torch.zeros_like(w[i]) for i in TRAINABLE}
    v = {i: torch.zeros_like(w[i]) for i in TRAINABLE}
    norms = []
    for t in range(1, 6):
        g = grads(w)
        gnorm = torch.sqrt(sum((gi ** 2).sum() for gi in g)).item()
        norms.append(gnorm)
        clip = gnorm / MAX_NORM if gnorm > MAX_NORM else 1.0
        b1, b2 = BETAS
        with torch.no_grad():
            for gi, i in zip(g, TRAINABLE):
                gi = gi / clip
                m[i] = b1 * m[i] + (1 - b1) * gi
                v[i] = b2 * v[i] + (1 - b2) * gi * gi
                u = (m[i] / (1 - b1 ** t)) / (torch.sqrt(v[i] / (1 - b2 ** t)) + EPS) + wd * w[i]
                pn, un = w[i].norm().item(), u.norm().item()
                ratio = LR * pn / un if (wd != 0 and pn > 0 and un > 0) else LR
                w[i] -= ratio * u
    for i in TRAINABLE:
        l, k, _ = params[i]
        np.save(os.path.join(out, sub, name(i, l, k)), w[i].detach().numpy().astype(np.float32))
    return norms
norms = lamb(WD, "after_lamb")
lamb(0.0, "after_lamb_wd0")
# 5 Adam steps with L2 added to the gradient (torch.optim.Adam's weight_decay)
w = load()
for i in TRAINABLE: w[i].requires_grad_(True)
opt = torch.optim.Adam([w[i] for i in TRAINABLE], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
for step in range(5):
    opt.zero_grad(); grads(w); opt.step()
for i in TRAINABLE:
    l, k, _ = params[i]
    np.save(os.path.join(out, "after_adam", name(i, l, k)), w[i].detach().numpy().astype(np.float32))

# 5 steps of LARC (clip mode: each tensor's gradient times min(eta |w| / |g|, 1), left alone
# when a norm is 0) before torch.optim.Adam without weight decay: the 2018 climate recipe
ETA = 0.002
w = load()
for i in TRAINABLE: w[i].requires_grad_(True)
opt = torch.optim.Adam([w[i] for i in TRAINABLE], lr=LR, betas=BETAS, eps=EPS)
for step in range(5):
    opt.zero_grad(); grads(w)
    with torch.no_grad():
        for i in TRAINABLE:
            wn, gn = w[i].norm().item(), w[i].grad.norm().item()
            if wn > 0 and gn > 0: w[i].grad *= min(ETA * wn / gn, 1.0)
    opt.step()
for i in TRAINABLE:
    l, k, _ = params[i]
    np.save(os.path.join(out, "after_larc_adam", name(i, l, k)), w[i].detach().numpy().astype(np.float32))

# gradient lag 1 (the 2018 climate code): 6 training steps, the update of step k applying the
# gradient of step k-1 (the first step only computes one), through torch.optim.Adam with L2 in
# the gradient: its step count is 1 at the first update, 5 at the last
w = load()
for i in TRAINABLE: w[i].requires_grad_(True)
opt = torch.optim.Adam([w[i] for i in TRAINABLE], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
prev = None
for step in range(6):
    g = [gi.clone() for gi in grads(w)]
    if prev is not None:
        for gi, i in zip(prev, TRAINABLE): w[i].grad = gi
        opt.step()
    prev = g
for i in TRAINABLE:
    l, k, _ = params[i]
    np.save(os.path.join(out, "after_adam_lag", name(i, l, k)), w[i].detach().numpy().astype(np.float32))

open(os.path.join(out, "hyper.txt"), "w").write("%g %g %g %g %g %g\n" % (LR, WD, BETAS[0], BETAS[1], EPS, MAX_NORM))
print("wrote", out, "LAMB gradient norms", ["%.3f" % n for n in norms])
