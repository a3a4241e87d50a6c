#!/usr/bin/python3
"""Every layer type and loss against PyTorch in float64, one operation at a time, through the
tools a user would use: a one-layer cfg (plus [flatten] and an MSE loss, or a segmentation
loss), its weights written here -> cf-convert weights-import -> cf-check --dump -> the output
(forward), every parameter gradient (backward-weights) and the input gradient (backward-data)
compared, each relative to the tensor's largest value.  Then the same in bf16 (cf-check
--precision bf16: operands rounded to bfloat16, outputs rounded when stored) against the same
float64 reference, as the relative L2 error of each tensor (||ours - ref|| / ||ref||), within
the bound each case states: about 2^-8 per rounding, more where a max pool's window has two
inputs that bf16 makes equal and its gradient goes to another one.  Prints one 'agree
OPERATION ERROR TOLERANCE' line per comparison (make agreement collects them) and 'N passed,
M failed'.
CF_BINS (default 'bin'): the tool directories to check, e.g. 'bin bin/ref' for the default
and the CF_REFERENCE builds.  Exits 0 with a message when python3-torch is absent."""
import os, subprocess, sys, tempfile
try:
    import numpy as np, torch, torch.nn.functional as F
except ImportError:
    print("skipped: python3-torch / python3-numpy not installed (apt-get install python3-torch python3-numpy)")
    print("0 passed, 0 failed")
    sys.exit(0)

torch.manual_seed(7)
dt = torch.float64
here = os.path.dirname(os.path.abspath(__file__))
bins = os.environ.get("CF_BINS", "bin").split()
TOL = 1e-5          # float32 arithmetic on these small layers against float64
tmp = tempfile.mkdtemp(prefix="cf-ops-")
passed = failed = 0

def relerr(ours, ref):
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(ours.astype(np.float64).reshape(ref.shape) - ref)) / max(np.max(np.abs(ref)), 1e-30))
def rel_l2(ours, ref):
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(ours.astype(np.float64).reshape(ref.shape) - ref) / max(np.linalg.norm(ref), 1e-30))
def check(label, err, tol):
    global passed, failed
    ok = err <= tol
    passed += ok; failed += not ok
    print("agree %s %.3g %.0e" % (label.replace(" ", "_"), err, tol))
    if not ok: print("FAIL %s: relative error %.3g > %.0e" % (label, err, tol))
def f32(t):   # what the C side reads: float32-rounded, used in float64 by the reference
    return torch.tensor(t.detach().numpy().astype(np.float32), dtype=dt)

BF16 = 1e-2        # bf16: relative L2 error of each tensor (2^-8 = 3.9e-3 per rounding)
def run_case(name, cfg, shape, params, forward, loss="mse", target=None, mode="eval", tol=TOL, bf16=BF16):
    """cfg: the layer's sections; params: [(cfg layer, kind, tensor)]; forward(x, params) -> output"""
    d = os.path.join(tmp, name)
    os.makedirs(os.path.join(d, "w"))
    x = f32(torch.rand(*shape, dtype=dt) * 2 - 1).requires_grad_(True)
    ps = [(l, k, f32(t).requires_grad_(k not in ("running_mean", "running_var"))) for l, k, t in params]
    for i, (l, k, t) in enumerate(ps): np.save(os.path.join(d, "w", "%03d_%d_%s.npy" % (i, l, k)), t.detach().numpy().astype(np.float32))
    out = forward(x, [t for _, _, t in ps])
    if loss == "softmax_ce":
        y = torch.randint(0, out.shape[1], (out.shape[0],) + tuple(out.shape[2:]))
        wc = torch.tensor([0.986267818390377, 0.0004578708870701058, 0.01327431072255291], dtype=dt) ** -0.125
        L = torch.mean(F.cross_entropy(out, y, weight=wc[:out.shape[1]] if out.shape[1] == 3 else None, reduction="none"))
        yv = y.numpy().astype(np.float32)
    else:
        flat = out.reshape(out.shape[0], -1)
        y = f32(torch.rand(*flat.shape, dtype=dt) * 2 - 1)
        L = F.mse_loss(flat, y) if loss == "mse" else F.l1_loss(flat, y)
        yv = y.numpy().astype(np.float32)
    L.backward()
    np.save(os.path.join(d, "x.npy"), x.detach().numpy().astype(np.float32)); np.save(os.path.join(d, "y.npy"), yv)
    net = "[net]\ninput=%s\nloss=%s\n%s" % ("x".join(str(s) for s in shape[1:]), loss, cfg)
    if loss == "softmax_ce" and out.shape[1] != 3: net = net.replace("loss=softmax_ce\n", "loss=softmax_ce\nclass_weights=uniform\n")
    open(os.path.join(d, "m.cfg"), "w").write(net)
    for b, prec in [(b, "fp32") for b in bins] + [(bins[0], "bf16")]:
        tag = ("" if b == "bin" else " (%s)" % os.path.basename(b.rstrip("/"))) + (" bf16" if prec == "bf16" else "")
        err, t_ = (relerr, tol) if prec == "fp32" else (rel_l2, bf16)
        ck, dump = os.path.join(d, "w-%s.cfck" % os.path.basename(b)), os.path.join(d, "dump-%s-%s" % (os.path.basename(b), prec))
        tool = lambda t: os.path.join(here, "..", b, t)
        if not os.path.exists(ck):
            subprocess.run([tool("cf-convert"), "weights-import", "--model", os.path.join(d, "m.cfg"), "--npy", os.path.join(d, "w"), "--out", ck], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([tool("cf-check"), "--weights", ck, "--input", os.path.join(d, "x.npy"), "--target", os.path.join(d, "y.npy"),
                        "--mode", mode, "--dump", dump, "--precision", prec], check=True, stdout=subprocess.DEVNULL)
        check(name + " forward" + tag, err(np.load(os.path.join(dump, "output.npy")), out.detach().numpy()), t_)
        check(name + " loss" + tag, abs(float(open(os.path.join(dump, "loss.txt")).read()) - L.item()) / abs(L.item()), t_)
        for i, (l, k, t) in enumerate(ps):
            if t.grad is None: continue
            check("%s backward %s%s" % (name, k, tag), err(np.load(os.path.join(dump, "grad", "%03d_%d_%s.npy" % (i, l, k))), t.grad.numpy()), t_)
        check(name + " backward-data" + tag, err(np.load(os.path.join(dump, "grad_input.npy")), x.grad.numpy()), t_)

def W(*s, scale=0.5): return (torch.rand(*s, dtype=dt) * 2 - 1) * scale
def leaky(v): return F.leaky_relu(v, 0.3)

# ---- convolutions: the shapes that reach each path of the dispatchers
w, b = W(5, 3, 3, 3, 3), W(5, scale=0.1)
run_case("conv3d_3x3x3_same_leaky", "[conv]\nfilters=5\nsize=3\npad=same\nactivation=leaky\nslope=0.3\n[flatten]\n", (2, 3, 6, 7, 37),
         [(0, "weight", w), (0, "bias", b)], lambda x, p: leaky(F.conv3d(x, p[0], p[1], padding=1)))
w = W(6, 2, 3, 3, 3)
run_case("conv3d_stride2_dilation2_groups2", "[conv]\nfilters=6\nsize=3\nstride=2\ndilation=2\npad=2\ngroups=2\nbias=0\n[flatten]\n", (2, 4, 7, 8, 9),
         [(0, "weight", w)], lambda x, p: F.conv3d(x, p[0], None, stride=2, dilation=2, padding=2, groups=2))
w, b = W(4, 6, 1, 1), W(4, scale=0.1)
run_case("conv2d_pointwise_relu", "[conv]\nfilters=4\nsize=1\nactivation=relu\n[flatten]\n", (2, 6, 9, 10),
         [(0, "weight", w), (0, "bias", b)], lambda x, p: F.relu(F.conv2d(x, p[0], p[1])))
w = W(5, 3, 2, 2, 2)   # TensorFlow 'same' with kernel 2: 0 before, 1 after (CosmoFlow v0.7)
run_case("conv3d_k2_same_asymmetric", "[conv]\nfilters=5\nsize=2\npad=same\nbias=0\n[flatten]\n", (1, 3, 5, 6, 7),
         [(0, "weight", w)], lambda x, p: F.conv3d(F.pad(x, (0, 1, 0, 1, 0, 1)), p[0]))
w = W(6, 1, 3, 3)
run_case("conv2d_depthwise_dilation2", "[conv]\nfilters=6\nsize=3\ndilation=2\npad=2\ngroups=6\nbias=0\n[flatten]\n", (2, 6, 11, 13),
         [(0, "weight", w)], lambda x, p: F.conv2d(x, p[0], None, dilation=2, padding=2, groups=6))
w, b = W(4, 3, 3, 3), W(3, scale=0.1)   # DeepCAM's decoder: (C, OC, k, k), stride 2, pad 1, output padding 1
run_case("deconv2d_s2_p1_op1", "[deconv]\nfilters=3\nsize=3\nstride=2\npad=1\noutput_padding=1\n[flatten]\n", (2, 4, 6, 7),
         [(0, "weight", w), (0, "bias", b)], lambda x, p: F.conv_transpose2d(x, p[0], p[1], stride=2, padding=1, output_padding=1))
w = W(3, 2, 2, 2, 2)
run_case("deconv3d_k2_s2_tanh", "[deconv]\nfilters=2\nsize=2\nstride=2\nbias=0\nactivation=tanh\n[flatten]\n", (1, 3, 3, 4, 5),
         [(0, "weight", w)], lambda x, p: torch.tanh(F.conv_transpose3d(x, p[0], None, stride=2)))
# ---- pooling, dense and the elementwise layers
run_case("maxpool3d_2x2x2", "[maxpool]\nsize=2\n[flatten]\n", (2, 3, 6, 8, 10), [], lambda x, p: F.max_pool3d(x, 2),
         bf16=0.15)   # bf16 makes some windows' two largest inputs equal: the gradient goes to the first
run_case("maxpool2d_3_stride2_pad1", "[maxpool]\nsize=3\nstride=2\npad=1\n[flatten]\n", (2, 3, 9, 11), [], lambda x, p: F.max_pool2d(x, 3, 2, 1))
run_case("avgpool3d_3_stride2_pad1", "[avgpool]\nsize=3\nstride=2\npad=1\n[flatten]\n", (2, 2, 7, 7, 9), [],
         lambda x, p: F.avg_pool3d(x, 3, 2, 1, count_include_pad=False))
w, b = W(7, 60), W(7, scale=0.1)
run_case("dense_leaky", "[flatten]\n[dense]\noutputs=7\nactivation=leaky\nslope=0.3\n", (3, 3, 4, 5), [(1, "weight", w), (1, "bias", b)],
         lambda x, p: leaky(F.linear(x.reshape(3, -1), p[0], p[1])))
g, be, rm, rv = 1 + W(4, scale=0.3), W(4, scale=0.2), W(4, scale=0.3), 1 + W(4, scale=0.4)
for mode in ("train", "eval"):
    run_case("batchnorm_relu_" + mode, "[batchnorm]\nactivation=relu\n[flatten]\n", (3, 4, 5, 6),
             [(0, "gamma", g), (0, "beta", be), (0, "running_mean", rm), (0, "running_var", rv)],
             lambda x, p, m=mode: F.relu(F.batch_norm(x, p[2].detach().clone(), p[3].detach().clone(), p[0], p[1], training=m == "train", momentum=0.1, eps=1e-5)),
             mode=mode)
run_case("activation_tanh", "[activation]\nactivation=tanh\n[flatten]\n", (2, 3, 4, 5), [], lambda x, p: torch.tanh(x))
run_case("scale_1.2", "[scale]\nfactor=1.2\n[flatten]\n", (2, 3, 4, 5), [], lambda x, p: 1.2 * x)
w, b = 1 + W(3, scale=0.3), W(3, scale=0.2)
run_case("affine_relu", "[affine]\nactivation=relu\n[flatten]\n", (2, 3, 4, 5), [(0, "weight", w), (0, "bias", b)],
         lambda x, p: F.relu(x * p[0].view(1, 3, 1, 1) + p[1].view(1, 3, 1, 1)))
run_case("gap_broadcast_route_add", "[scale]\nfactor=0.5\n[gap]\n[broadcast]\nlike=0\n[route]\nlayers=-1,0\n[conv]\nfilters=3\nsize=1\nbias=0\n"
         "[add]\nlayers=-1,input\n[flatten]\n", (2, 3, 4, 5), [(4, "weight", W(3, 6, 1, 1))],
         lambda x, p: F.conv2d(torch.cat([(0.5 * x).mean(dim=(2, 3), keepdim=True).expand(-1, -1, 4, 5), 0.5 * x], 1), p[0]) + x)
# ---- losses
w = W(4, 3, 3, 3)
run_case("loss_l1", "[conv]\nfilters=4\nsize=3\npad=1\nbias=0\n[flatten]\n", (2, 3, 5, 6), [(0, "weight", w)],
         lambda x, p: F.conv2d(x, p[0], padding=1), loss="l1")
w = W(3, 4, 3, 3)
run_case("loss_softmax_ce_weighted", "[conv]\nfilters=3\nsize=3\npad=1\nbias=0\n", (2, 4, 6, 7), [(0, "weight", w)],
         lambda x, p: F.conv2d(x, p[0], padding=1), loss="softmax_ce")
subprocess.run(["rm", "-rf", tmp])
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
