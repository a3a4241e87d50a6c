#!/usr/bin/python3
"""Writes the PyTorch reference for tests/ref/cosmo-ref.cfg into tests/ref/cosmo_ref/:
weights (our interchange names, PyTorch layouts), input, target, output, loss, every
gradient, and the weights after 10 Keras-form momentum-SGD steps with L2 on the two hidden
dense kernels.  Computed in float64 so the C float32 results are compared with the exact
values.  Run: /usr/bin/python3 tests/make_ref.py   (Debian python3-torch, python3-numpy)."""
import os, numpy as np, torch, torch.nn.functional as F

torch.manual_seed(0)
out = os.path.join(os.path.dirname(__file__), "ref", "cosmo_ref")
for d in ("", "weights", "grad", "after10"):
    os.makedirs(os.path.join(out, d), exist_ok=True)
dt = torch.float64
B, LR, MOM, L2 = 3, 0.02, 0.9, 0.01

def p(*shape, scale):
    return (torch.rand(*shape, dtype=dt) * 2 - 1) * scale
# (cfg layer index, kind, tensor); biases non-zero so their gradients are tested too
params = [
    (0, "weight", p(8, 4, 3, 3, 3, scale=0.3)), (0, "bias", p(8, scale=0.1)),
    (2, "weight", p(16, 8, 2, 2, 2, scale=0.2)), (2, "bias", p(16, scale=0.1)),
    (4, "weight", p(16, 16, 3, 3, 3, scale=0.1)), (4, "bias", p(16, scale=0.1)),
    (6, "weight", p(32, 16 * 2 * 2 * 2, scale=0.2)), (6, "bias", p(32, scale=0.1)),
    (8, "weight", p(16, 32, scale=0.3)), (8, "bias", p(16, scale=0.1)),
    (9, "weight", p(4, 16, scale=0.3)), (9, "bias", p(4, scale=0.1)),
]
l2_tensors = {6, 8}  # layers whose kernels carry L2 (l2=1 in the cfg)

def name(i, layer, kind):
    return "%03d_%d_%s.npy" % (i, layer, kind)

def forward(x, w):
    lr = lambda t: F.leaky_relu(t, 0.3)
    h = lr(F.conv3d(x, w[0], w[1], padding=1))
    h = F.max_pool3d(h, 2)
    h = lr(F.conv3d(F.pad(h, (0, 1, 0, 1, 0, 1)), w[2], w[3]))   # TF 'same', kernel 2
    h = F.avg_pool3d(h, 2)
    h = lr(F.conv3d(h, w[4], w[5], stride=2, padding=1))
    h = h.reshape(h.shape[0], -1)                                # C order of (C, D, H, W)
    h = lr(F.linear(h, w[6], w[7]))                              # dropout: off (eval)
    h = lr(F.linear(h, w[8], w[9]))
    return torch.tanh(F.linear(h, w[10], w[11])) * 1.2

# input like log(1 + counts): non-negative, skewed
x = torch.log1p(torch.poisson(torch.ones(B, 4, 16, 16, 16, dtype=dt) * 1.0))
t = torch.rand(B, 4, dtype=dt) * 2 - 1
w = [q[2].clone().requires_grad_(True) for q in params]
for i, (layer, kind, tensor) in enumerate(params):
    np.save(os.path.join(out, "weights", name(i, layer, kind)), tensor.numpy().astype(np.float32))
np.save(os.path.join(out, "input.npy"), x.numpy().astype(np.float32))
np.save(os.path.join(out, "target.npy"), t.numpy().astype(np.float32))
# use exactly the float32-rounded values the C side sees
w = [torch.tensor(np.load(os.path.join(out, "weights", name(i, l, k))), dtype=dt, requires_grad=True) for i, (l, k, _) in enumerate(params)]
x = torch.tensor(np.load(os.path.join(out, "input.npy")), dtype=dt)
t = torch.tensor(np.load(os.path.join(out, "target.npy")), dtype=dt)

y = forward(x, w)
loss = F.mse_loss(y, t)
loss.backward()
np.save(os.path.join(out, "output.npy"), y.detach().numpy().astype(np.float32))
with open(os.path.join(out, "loss.txt"), "w") as f:
    f.write("%.12g\n" % loss.item())
with open(os.path.join(out, "hyper.txt"), "w") as f:
    f.write("%g %g %g\n" % (LR, MOM, L2))
for i, (layer, kind, _) in enumerate(params):
    np.save(os.path.join(out, "grad", name(i, layer, kind)), w[i].grad.numpy().astype(np.float32))

# Keras SGD: v = m*v - lr*(g + 2*l2*w) on L2 kernels; w += v
v = [torch.zeros_like(q) for q in w]
for step in range(10):
    for q in w:
        q.grad = None
    F.mse_loss(forward(x, w), t).backward()
    with torch.no_grad():
        for i, (layer, kind, _) in enumerate(params):
            g = w[i].grad + (2 * L2 * w[i] if kind == "weight" and layer in l2_tensors else 0)
            v[i] = MOM * v[i] - LR * g
            w[i] += v[i]
for i, (layer, kind, _) in enumerate(params):
    np.save(os.path.join(out, "after10", name(i, layer, kind)), w[i].detach().numpy().astype(np.float32))
print("wrote", out, "loss", loss.item())
