#!/usr/bin/python3
"""models/cosmoflow.cfg at --input-shape 4x32x32x32 against PyTorch, through the tools a user
would use: weights made here in PyTorch -> cf-convert weights-import -> cf-check --dump ->
output, loss and every gradient compared (relative error at most 1e-4, relative to each
tensor's largest value).  Prints 'N passed, M failed'; exits 0 with a message when
python3-torch is absent."""
import os, subprocess, sys, tempfile
try:
    import numpy as np, torch, torch.nn.functional as F
except ImportError:
    print("skipped: python3-torch / python3-numpy not installed (apt-get install python3-torch python3-numpy)")
    print("0 passed, 0 failed")
    sys.exit(0)

torch.manual_seed(1)
dt = torch.float64
B, S = 2, 32
chans = [4, 32, 64, 128, 256, 512]
tensors = []                      # (cfg layer index, kind, tensor)
layer = 0
for i in range(5):                # [conv], [maxpool] pairs: layers 0..9
    cin, cout = chans[i], chans[i + 1]
    lim = (6.0 / ((cin + cout) * 27)) ** 0.5
    tensors += [(layer, "weight", (torch.rand(cout, cin, 3, 3, 3, dtype=dt) * 2 - 1) * lim),
                (layer, "bias", (torch.rand(cout, dtype=dt) * 2 - 1) * 0.05)]
    layer += 2
flat = 512 * (S // 32) ** 3       # layer 10 is [flatten]
for lay, (i, o) in [(11, (flat, 128)), (13, (128, 64)), (15, (64, 4))]:
    lim = (6.0 / (i + o)) ** 0.5
    tensors += [(lay, "weight", (torch.rand(o, i, dtype=dt) * 2 - 1) * lim), (lay, "bias", (torch.rand(o, dtype=dt) * 2 - 1) * 0.05)]

tmp = tempfile.mkdtemp(prefix="cf-torch-")
wdir = os.path.join(tmp, "weights"); os.makedirs(wdir)
for k, (lay, kind, t) in enumerate(tensors):
    np.save(os.path.join(wdir, "%03d_%d_%s.npy" % (k, lay, kind)), t.numpy().astype(np.float32))
x = torch.log1p(torch.poisson(torch.ones(B, 4, S, S, S, dtype=dt)))
y = torch.rand(B, 4, dtype=dt) * 2 - 1
np.save(os.path.join(tmp, "x.npy"), x.numpy().astype(np.float32))
np.save(os.path.join(tmp, "y.npy"), y.numpy().astype(np.float32))

# the reference computation, in float64 on the float32-rounded values the C side reads
w = [torch.tensor(np.load(os.path.join(wdir, "%03d_%d_%s.npy" % (k, l, kd))), dtype=dt, requires_grad=True) for k, (l, kd, _) in enumerate(tensors)]
x = torch.tensor(np.load(os.path.join(tmp, "x.npy")), dtype=dt)
y = torch.tensor(np.load(os.path.join(tmp, "y.npy")), dtype=dt)
h = x
for i in range(5):
    h = F.max_pool3d(F.leaky_relu(F.conv3d(h, w[2 * i], w[2 * i + 1], padding=1), 0.3), 2)
h = h.reshape(B, -1)
h = F.leaky_relu(F.linear(h, w[10], w[11]), 0.3)
h = F.leaky_relu(F.linear(h, w[12], w[13]), 0.3)
out = torch.tanh(F.linear(h, w[14], w[15])) * 1.2
loss = F.mse_loss(out, y)
loss.backward()

here = os.path.dirname(os.path.abspath(__file__))
model = os.path.join(here, "..", "models", "cosmoflow.cfg")
run = lambda *a: subprocess.run(a, check=True, stdout=subprocess.DEVNULL)
passed = failed = 0
def relerr(ours, ref):
    return float(np.max(np.abs(ours.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))
def check(name, err, tol=1e-4):
    global passed, failed
    ok = err <= tol
    passed += ok; failed += not ok
    print("%s %-40s relative error %.2e" % ("ok  " if ok else "FAIL", name, err))
    return err
# CF_BINS: the tool directories to check (make test: the default and the CF_REFERENCE builds)
for b in os.environ.get("CF_BINS", "bin").split():
    bin_, tag = os.path.join(here, "..", b), "" if b == "bin" else " (%s)" % os.path.basename(b.rstrip("/"))
    ck, dump = os.path.join(tmp, "w.cfck"), os.path.join(tmp, "dump")
    run(os.path.join(bin_, "cf-convert"), "weights-import", "--model", model, "--input-shape", "4x32x32x32", "--npy", wdir, "--out", ck)
    run(os.path.join(bin_, "cf-check"), "--model", model, "--input-shape", "4x32x32x32", "--weights", ck,
        "--input", os.path.join(tmp, "x.npy"), "--target", os.path.join(tmp, "y.npy"), "--dump", dump)
    e = check("output" + tag, relerr(np.load(os.path.join(dump, "output.npy")), out.detach().numpy()))
    print("agree cosmoflow.cfg_output%s %.3g 1e-04" % (tag.replace(" ", "_"), e))
    e = check("loss" + tag, abs(float(open(os.path.join(dump, "loss.txt")).read()) - loss.item()) / abs(loss.item()))
    print("agree cosmoflow.cfg_loss%s %.3g 1e-04" % (tag.replace(" ", "_"), e))
    worst = 0
    for k, (l, kd, _) in enumerate(tensors):
        n = "%03d_%d_%s.npy" % (k, l, kd)
        worst = max(worst, check("grad " + n + tag, relerr(np.load(os.path.join(dump, "grad", n)), w[k].grad.numpy())))
    print("agree cosmoflow.cfg_gradients_(%d_tensors)%s %.3g 1e-04" % (len(tensors), tag.replace(" ", "_"), worst))
    # the other direction: our checkpoint exported as PyTorch-layout .npy files and loaded into the
    # PyTorch network gives our output (the documented round trip)
    exp = os.path.join(tmp, "exported-%s" % os.path.basename(b))
    run(os.path.join(bin_, "cf-convert"), "weights-export", "--weights", ck, "--out", exp)
    w2 = [torch.tensor(np.load(os.path.join(exp, "%03d_%d_%s.npy" % (k, l, kd))), dtype=dt) for k, (l, kd, _) in enumerate(tensors)]
    h = x
    for i in range(5):
        h = F.max_pool3d(F.leaky_relu(F.conv3d(h, w2[2 * i], w2[2 * i + 1], padding=1), 0.3), 2)
    h = F.leaky_relu(F.linear(h.reshape(B, -1), w2[10], w2[11]), 0.3)
    h = F.leaky_relu(F.linear(h, w2[12], w2[13]), 0.3)
    check("exported weights in PyTorch" + tag, relerr(np.load(os.path.join(dump, "output.npy")), (torch.tanh(F.linear(h, w2[14], w2[15])) * 1.2).numpy()))
# bf16 (cf-check --precision bf16) against the same float64 computation: the loss within 2e-3
# (relative), the output and every gradient as relative L2 errors within the bounds below (the
# max pools send a gradient to another input where bf16 makes a window's two largest equal,
# and a leaky ReLU near 0 may change its slope: with 2 samples one such flip in the 64-unit
# dense layer moves its gradient by about 9 %)
def rel_l2(ours, ref): return float(np.linalg.norm(ours.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30))
ck, dump = os.path.join(tmp, "w.cfck"), os.path.join(tmp, "dump-bf16")
run(os.path.join(here, "..", "bin", "cf-convert"), "weights-import", "--model", model, "--input-shape", "4x32x32x32", "--npy", wdir, "--out", ck)
run(os.path.join(here, "..", "bin", "cf-check"), "--model", model, "--input-shape", "4x32x32x32", "--weights", ck,
    "--input", os.path.join(tmp, "x.npy"), "--target", os.path.join(tmp, "y.npy"), "--dump", dump, "--precision", "bf16")
e = check("bf16 output (relative L2)", rel_l2(np.load(os.path.join(dump, "output.npy")), out.detach().numpy()), 1e-2)
print("agree cosmoflow.cfg_bf16_output_(relative_L2) %.3g 1e-02" % e)
e = check("bf16 loss", abs(float(open(os.path.join(dump, "loss.txt")).read()) - loss.item()) / abs(loss.item()), 2e-3)
print("agree cosmoflow.cfg_bf16_loss %.3g 2e-03" % e)
worst = 0
for k, (l, kd, _) in enumerate(tensors):
    n = "%03d_%d_%s.npy" % (k, l, kd)
    worst = max(worst, check("bf16 grad %s (relative L2)" % n, rel_l2(np.load(os.path.join(dump, "grad", n)), w[k].grad.numpy()), 0.3))
print("agree cosmoflow.cfg_bf16_gradients_(%d_tensors,_relative_L2) %.3g 3e-01" % (len(tensors), worst))
subprocess.run(["rm", "-rf", tmp])
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
