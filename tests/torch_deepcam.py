#!/usr/bin/python3
"""models/deepcam.cfg at --input-shape 16x96x144 against PyTorch, through the tools a user
would use: the reference network built here in PyTorch (module structure and names of the
MLPerf reference's deeplab_xception.py), its weights written as our .npy interchange files
-> cf-convert weights-import -> cf-check --dump --mode train -> output, loss and every
gradient compared (relative error at most 1e-3, relative to each tensor's largest value;
eval mode with two inputs, train mode against PyTorch float32's own error: see below).
Which PyTorch module a cfg layer is comes from the '# torch:' comments of the cfg (written by
models/gen_deepcam.py).  Prints 'N passed, M failed'; exits 0 with a message when
python3-torch is absent."""
import copy, os, subprocess, sys, tempfile
try:
    import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
except ImportError:
    print("skipped: python3-torch / python3-numpy not installed (apt-get install python3-torch python3-numpy)")
    print("0 passed, 0 failed")
    sys.exit(0)

torch.manual_seed(3)
torch.set_num_threads(2)
dt = torch.float64

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_deeplab import DeepLab, TrainableAffine

net = DeepLab().to(dt)
with torch.no_grad():   # non-trivial batch-norm and affine parameters, so their gradients are tested
    for m in net.modules():
        if isinstance(m, (nn.BatchNorm2d, TrainableAffine)):
            m.weight.uniform_(0.5, 1.5); m.bias.uniform_(-0.2, 0.2)
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1); m.running_var.uniform_(0.5, 1.5)

here = os.path.dirname(os.path.abspath(__file__))
model = os.path.join(here, "..", "models", "deepcam.cfg")
bin_ = os.path.join(here, "..", "bin")
# the cfg's tensors in network order, with their PyTorch modules
tensors, layer, sec = [], -1, None
def flush(sec, kv, torch_name, layer):
    if sec is None or sec == "net": return
    if sec in ("conv", "deconv", "affine"):
        mod = net.get_submodule(torch_name)
        tensors.append((layer, "weight", mod.weight))
        if kv.get("bias", "1" if sec != "affine" else "1") == "1":
            tensors.append((layer, "bias", mod.bias))
    elif sec == "batchnorm":
        mod = net.get_submodule(torch_name)
        tensors.extend([(layer, "gamma", mod.weight), (layer, "beta", mod.bias),
                        (layer, "running_mean", mod.running_mean), (layer, "running_var", mod.running_var)])
kv, pending, cur = {}, None, None
for line in open(model):
    line = line.strip()
    if line.startswith("# torch:"):
        pending = line.split(":", 1)[1].strip()
    elif line.startswith("["):
        flush(sec, kv, cur, layer)
        sec, kv, cur, pending = line[1:-1], {}, pending, None
        if sec != "net": layer += 1
    elif "=" in line and not line.startswith("#"):
        k, v = line.split("=", 1); kv[k] = v
flush(sec, kv, cur, layer)

tmp = tempfile.mkdtemp(prefix="cf-torch-deepcam-")
wdir = os.path.join(tmp, "weights"); os.makedirs(wdir)
name = lambda k, l, kd: "%03d_%d_%s.npy" % (k, l, kd)
for k, (l, kd, t) in enumerate(tensors):
    np.save(os.path.join(wdir, name(k, l, kd)), t.detach().numpy().astype(np.float32))
with torch.no_grad():   # the float32-rounded values the C side reads
    for k, (l, kd, t) in enumerate(tensors):
        t.copy_(torch.tensor(np.load(os.path.join(wdir, name(k, l, kd))), dtype=dt))
B, H, W = 2, 96, 144
x = torch.rand(B, 16, H, W, dtype=dt).numpy().astype(np.float32)
y = torch.randint(0, 3, (B, H, W)).numpy().astype(np.float32)
x2 = torch.rand(B, 16, H, W, dtype=dt).numpy().astype(np.float32)   # eval mode's second input
np.save(os.path.join(tmp, "x.npy"), x); np.save(os.path.join(tmp, "y.npy"), y); np.save(os.path.join(tmp, "x2.npy"), x2)
w_class = torch.tensor([0.986267818390377, 0.0004578708870701058, 0.01327431072255291], dtype=dt) ** -0.125
def owner_of(t):
    """the name of the module that holds parameter t"""
    return [n for n, mm in net.named_modules() if any(q is t for q in mm.parameters(recurse=False))][0]
def reference(mode, dtype, xin):
    """output, loss and gradients of the network in PyTorch at the given precision"""
    m = copy.deepcopy(net).to(dtype)
    m.train(mode == "train")
    m.zero_grad()
    o = m(torch.tensor(xin, dtype=dtype))
    L = torch.mean(F.cross_entropy(o, torch.tensor(y).long(), weight=w_class.to(dtype), reduction="none"))
    L.backward()
    mods = dict(m.named_modules())
    grads = {}
    for k, (l, kd, t) in enumerate(tensors):
        if kd.startswith("running"): continue
        grads[k] = getattr(mods[owner_of(t)], "weight" if kd in ("weight", "gamma") else "bias").grad.double().numpy()
    return o.detach().double().numpy(), L.item(), grads

run = lambda *a: subprocess.run(a, check=True, stdout=subprocess.DEVNULL)
passed = failed = 0
def relerr(ours, ref):
    return float(np.max(np.abs(ours.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))
def check(ok, line):
    global passed, failed
    passed += ok; failed += not ok
    print(("ok   " if ok else "FAIL ") + line)
def agree(what, err, tol):
    print("agree deepcam.cfg_%s %.3g %s" % (what.replace(" ", "_"), err, tol))
def dump_for(bin_, ck, mode, xname, precision="fp32"):
    d = os.path.join(tmp, "dump-%s-%s-%s-%s" % (os.path.basename(bin_), mode, xname, precision))
    run(os.path.join(bin_, "cf-check"), "--weights", ck, "--mode", mode, "--precision", precision,
        "--input", os.path.join(tmp, xname + ".npy"), "--target", os.path.join(tmp, "y.npy"), "--dump", d)
    return d
# the references once; the C side for each tool directory of CF_BINS (make test: the default and
# the CF_REFERENCE builds)
refs = {mode: reference(mode, torch.float64, x) for mode in ("eval", "train")}
g64b = reference("eval", torch.float64, x2)[2]
g32 = reference("train", torch.float32, x)[2]
for b in os.environ.get("CF_BINS", "bin").split():
    bin_, tag = os.path.join(here, "..", b), "" if b == "bin" else " (%s)" % os.path.basename(b.rstrip("/"))
    ck = os.path.join(tmp, "w-%s.cfck" % os.path.basename(b))
    run(os.path.join(bin_, "cf-convert"), "weights-import", "--model", model, "--input-shape", "16x%dx%d" % (H, W), "--npy", wdir, "--out", ck)
    for mode in ("eval", "train"):
        dump = dump_for(bin_, ck, mode, "x")
        out64, loss64, g64 = refs[mode]
        e = relerr(np.load(os.path.join(dump, "output.npy")), out64)
        check(e <= 1e-3, "%s-mode batch norm%s: output relative error %.2e (at most 1e-3)" % (mode, tag, e))
        agree("%s-mode output%s" % (mode, tag), e, "1e-03")
        e = abs(float(open(os.path.join(dump, "loss.txt")).read()) - loss64) / abs(loss64)
        check(e <= 1e-3, "%s-mode batch norm%s: loss relative error %.2e (at most 1e-3)" % (mode, tag, e))
        agree("%s-mode loss%s" % (mode, tag), e, "1e-03")
        # Gradients.  In eval mode every one is held to 1e-3.  In train mode the backward of 60
        # batch norms over 1e2..1e5 values each amplifies float32 rounding: PyTorch's own float32
        # gradients differ from its float64 ones by ~1e-2 (median) and up to 0.19 (the ASPP
        # convolutions on a 6x9 map) here, so no float32 code can meet 1e-3.  There the median
        # of our errors must be within 1.5 x PyTorch float32's median (as exact as PyTorch); the
        # worst tensors are printed.  Eval mode checks every kernel at 1e-3 with a second input
        # too, and each tensor must meet it with one of the two: a ReLU input within float32's
        # rounding of zero takes either sign depending on the order of summation (with x one sits
        # at 2.4e-8 of its tensor's largest value in the 728x6x9 middle flow: OpenBLAS's Haswell
        # kernels flip it, its SSE3 ones do not, and the nearby weight gradients move by ~1e-2);
        # that belongs to one input's values, while a kernel error shows with both.
        second = {}
        if mode == "eval":
            dump2 = dump_for(bin_, ck, mode, "x2")
            for k in g64b:
                l, kd, _ = tensors[k]
                second[k] = relerr(np.load(os.path.join(dump2, "grad", name(k, l, kd))), g64b[k])
        worst, worst32, bad, errs, errs32 = (0.0, ""), 0.0, [], [], []
        for k, ref in g64.items():
            l, kd, _ = tensors[k]
            e = relerr(np.load(os.path.join(dump, "grad", name(k, l, kd))), ref)
            if k in second: e = min(e, second[k])
            errs.append(e)
            if mode == "train": worst32 = max(worst32, relerr(g32[k], ref)); errs32.append(relerr(g32[k], ref))
            worst = max(worst, (e, name(k, l, kd)))
            if e > 1e-3: bad.append("%s %.2e > 1e-03" % (name(k, l, kd), e))
        line = "%s-mode batch norm%s: %d gradient tensors%s, worst relative error %.2e (%s)%s%s" % (
            mode, tag, len(g64), " (each the better of two inputs)" if second else "", worst[0], worst[1],
            "; PyTorch float32's own worst %.2e" % worst32 if mode == "train" else "", "; " + ", ".join(bad[:5]) if bad else "")
        if mode == "train":
            m, m32 = float(np.median(errs)), float(np.median(errs32))
            check(m <= 1.5 * m32, "train-mode batch norm%s: median gradient error %.2e, PyTorch float32's %.2e" % (tag, m, m32))
            agree("train-mode gradients_median_over_%d_tensors_(tolerance_1.5x_PyTorch_float32's)%s" % (len(g64), tag), m, "%.1e" % (1.5 * m32))
            print("info " + line)
        else:
            check(not bad, line)
            agree("eval-mode gradients_(%d_tensors,_better_of_two_inputs)%s" % (len(g64), tag), worst[0], "1e-03")
# bf16 (--precision bf16) against the same float64 computation, beside PyTorch's own bf16
# (CPU autocast on the float32 network: convolutions in bf16, batch norm and the loss in fp32,
# as here).  Eval mode: the loss within 2e-3 (relative), the output within 2e-2 and the median
# gradient within 0.1 (relative L2 errors).  Train mode on this 2-sample batch, the backward of
# 60 batch norms over maps down to 6x9 amplifies bf16's rounding as it amplifies fp32's (above)
# by ~1e4: PyTorch's bf16 misses the output by 0.78 and the gradients by 1.4 (median) there, so
# each of our errors must be within 1.5x PyTorch bf16's (as exact as PyTorch), summed over two
# inputs: one input's is a draw from that amplified rounding (PyTorch's loss error 2.2e-3 with x,
# 8.8e-3 with x2; ours 3.6e-3 and 3.3e-3 under OpenBLAS's Zen kernels, 2026-12-07), where a
# kernel's error shows with both.  A draw of PyTorch's can also fall far below ours (on an Intel
# Xeon with AMX, 2026-12-07: its loss error 2.5e-3 over both inputs, ours 4.8e-3), so the
# train-mode bound is never below 5x the eval-mode one.
def reference_bf16(mode, xin):
    m = copy.deepcopy(net).to(torch.float32)
    m.train(mode == "train")
    m.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        o = m(torch.tensor(xin, dtype=torch.float32))
    o = o.float()
    L = torch.mean(F.cross_entropy(o, torch.tensor(y).long(), weight=w_class.float(), reduction="none"))
    L.backward()
    mods = dict(m.named_modules())
    return o.detach().double().numpy(), L.item(), {k: getattr(mods[owner_of(t)], "weight" if kd in ("weight", "gamma") else "bias").grad.double().numpy()
                                                   for k, (l, kd, t) in enumerate(tensors) if not kd.startswith("running")}
rel_l2 = lambda a, r: float(np.linalg.norm(a.astype(np.float64).reshape(np.shape(r)) - r) / max(np.linalg.norm(r), 1e-30))
def bf16_errors(out, loss, grads, ref):
    """loss, output and median gradient errors against float64 (ref: reference()'s)"""
    out64, loss64, g64 = ref
    errs = [rel_l2(grads[k], r) for k, r in g64.items()]
    return np.array([abs(loss - loss64) / abs(loss64), rel_l2(out, out64), float(np.median(errs))])
ck, bin_ = os.path.join(tmp, "w-bin.cfck"), os.path.join(here, "..", "bin")
for mode, inputs in (("eval", (("x", x, refs["eval"]),)),
                     ("train", (("x", x, refs["train"]), ("x2", x2, reference("train", torch.float64, x2))))):
    ours, peer = np.zeros(3), np.zeros(3)   # each error summed over the inputs
    for xname, xin, ref in inputs:
        dump = dump_for(bin_, ck, mode, xname, "bf16")
        ours += bf16_errors(np.load(os.path.join(dump, "output.npy")), float(open(os.path.join(dump, "loss.txt")).read()),
                            {k: np.load(os.path.join(dump, "grad", name(k, tensors[k][0], tensors[k][1]))) for k in ref[2]}, ref)
        peer += bf16_errors(*reference_bf16(mode, xin), ref)
    for what, e, p, bound in zip(("loss", "output_(relative_L2)", "gradients_median_(relative_L2)"), ours, peer, (2e-3, 2e-2, 0.1)):
        tol = bound if mode == "eval" else max(1.5 * p, 5 * bound)
        check(e <= tol, "bf16, %s-mode batch norm: %s %.3g (PyTorch bf16 autocast %.3g; at most %.3g)%s" % (
            mode, what, e, p, tol, ", summed over 2 inputs" if len(inputs) > 1 else ""))
        agree("bf16_%s-mode_%s" % (mode, what), e, "%.1e" % tol)
subprocess.run(["rm", "-rf", tmp])
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
