#!/usr/bin/python3
"""The 2018 configurations against independent PyTorch builds of the same networks:
models/cosmoflow-2018.cfg (the CosmoFlow paper's code, CosmoNet_128256.py) and
models/deeplab-resnet50-2018.cfg (the climate paper's DeepLabv3+ on TF-slim resnet_v2_50,
output stride 8, deconv1x decoder, batch norm replaced by x * 0.5), written here from the
TensorFlow sources' description, not from our cfg.  Checks: parameter counts at full size
(printed; also written to tests/ref/params_2018.txt), and for a reduced-size instance the
output, the loss and every gradient through cf-convert weights-import -> cf-check --dump
(relative error at most 1e-4).  Which PyTorch module a cfg layer is comes from the cfg's
'# torch:' comments (CosmoFlow 2018: layer order).  Prints 'N passed, M failed'."""
import copy, os, subprocess, sys, tempfile
try:
    import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
except ImportError:
    print("skipped: python3-torch / python3-numpy not installed")
    print("0 passed, 0 failed")
    sys.exit(0)
torch.manual_seed(5)
torch.set_num_threads(2)
dt = torch.float64
here = os.path.dirname(os.path.abspath(__file__))
passed = failed = 0
def check(ok, line):
    global passed, failed
    passed += ok; failed += not ok
    print(("ok   " if ok else "FAIL ") + line)
def relerr(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(np.max(np.abs(b)), 1e-30))

# ---------------------------------------------------------------- CosmoFlow 2018
class Cosmo2018(nn.Module):
    def __init__(self, flat=2048):   # 256 x 2^3 at 128^3; 256 x 1 at the reduced 112^3
        super().__init__()
        ch = [(1, 16, 3, 1), (16, 32, 4, 1), (32, 64, 4, 1), (64, 128, 3, 2), (128, 256, 3, 1), (256, 256, 2, 1), (256, 256, 2, 1)]
        self.convs = nn.ModuleList([nn.Conv3d(a, b, k, s) for a, b, k, s in ch])
        self.fcs = nn.ModuleList([nn.Linear(flat, 2048), nn.Linear(2048, 256), nn.Linear(256, 3)])
    def forward(self, x):   # dropout is off in the comparison (evaluation)
        for i, c in enumerate(self.convs):
            x = F.leaky_relu(c(x), 0.01)
            if i < 3: x = F.avg_pool3d(x, 2)
        x = x.reshape(x.shape[0], -1)
        x = F.leaky_relu(self.fcs[0](x), 0.01)
        x = F.leaky_relu(self.fcs[1](x), 0.01)
        return self.fcs[2](x)

# ---------------------------------------------------------------- DeepLabv3+ ResNet-50 v2, 2018
HALF = lambda x: 0.5 * x     # the paper's runs: slim batch_norm monkey-patched to x * 0.5
def conv_bn(m, x):           # slim conv2d with normalizer: conv (no bias) -> x 0.5 -> ReLU
    return F.relu(HALF(m(x)))
class Unit(nn.Module):       # bottleneck_v2
    def __init__(self, cin, depth, base, stride, rate):
        super().__init__()
        self.stride, self.rate = stride, rate
        self.shortcut = nn.Conv2d(cin, depth, 1, stride) if cin != depth else None
        self.conv1 = nn.Conv2d(cin, base, 1, bias=False)
        self.conv2 = nn.Conv2d(base, base, 3, stride, padding=rate if stride == 1 else 1, dilation=rate, bias=False)
        self.conv3 = nn.Conv2d(base, depth, 1)
    def forward(self, x):
        pre = HALF(x)                    # preact: no ReLU (the patch drops batch_norm's activation)
        short = self.shortcut(pre) if self.shortcut is not None else x[:, :, ::self.stride, ::self.stride]
        r = conv_bn(self.conv1, pre)
        self.low = r
        r = conv_bn(self.conv2, r)
        return short + self.conv3(r)
class Block(nn.Module):
    def __init__(self, cin, base, units, stride, rate):
        super().__init__()
        for u in range(units):
            setattr(self, "unit_%d" % (u + 1), Unit(cin if u == 0 else base * 4, base * 4, base, stride if u == units - 1 else 1, rate))
        self.n = units
    def forward(self, x):
        for u in range(self.n): x = getattr(self, "unit_%d" % (u + 1))(x)
        return x
class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(16, 64, 7, 2, 3)
        # output stride 8: block1 strides (to 1/8), blocks 2-4 dilate 1, 2, 4
        self.block1, self.block2 = Block(64, 64, 3, 2, 1), Block(256, 128, 4, 1, 1)
        self.block3, self.block4 = Block(512, 256, 6, 1, 2), Block(1024, 512, 3, 1, 4)
    def forward(self, x):
        x = self.conv1(x)
        x = F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), 3, 2)   # TF 'SAME'
        x = self.block1(x); low = self.block1.unit_3.low
        return self.block4(self.block3(self.block2(x))), low
class ImagePool(nn.Module):
    def __init__(self):
        super().__init__(); self.conv_1x1 = nn.Conv2d(2048, 256, 1, bias=False)
class ASPP(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_1x1 = nn.Conv2d(2048, 256, 1, bias=False)
        for i, r in enumerate((12, 24, 36)):
            setattr(self, "conv_3x3_%d" % (i + 1), nn.Conv2d(2048, 256, 3, padding=r, dilation=r, bias=False))
        self.image_level_features = ImagePool()
        self.conv_1x1_concat = nn.Conv2d(1280, 256, 1, bias=False)
    def forward(self, x):
        b = [conv_bn(self.conv_1x1, x)] + [conv_bn(getattr(self, "conv_3x3_%d" % i), x) for i in (1, 2, 3)]
        g = conv_bn(self.image_level_features.conv_1x1, x.mean((2, 3), keepdim=True))
        b.append(g.expand(-1, -1, x.shape[2], x.shape[3]))   # bilinear resize of a 1x1 map: constant
        return conv_bn(self.conv_1x1_concat, torch.cat(b, 1))
class LowLevel(nn.Module):
    def __init__(self):
        super().__init__(); self.conv_1x1 = nn.Conv2d(64, 48, 1, bias=False)
def deconv_same(m, x):       # tf conv2d_transpose 3x3 stride 2 'same': the full output cropped at the end
    y = F.conv_transpose2d(x, m.weight, m.bias, stride=2)
    return y[:, :, :2 * x.shape[2], :2 * x.shape[3]]
class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.deconv1 = nn.ConvTranspose2d(256, 256, 3, 2)
        self.low_level_features = LowLevel()
        self.conv_3x3_1 = nn.Conv2d(304, 256, 3, padding=1, bias=False)
        self.conv_3x3_2 = nn.Conv2d(256, 256, 3, padding=1, bias=False)
        self.deconv2, self.deconv3 = nn.ConvTranspose2d(256, 256, 3, 2), nn.ConvTranspose2d(256, 256, 3, 2)
        self.skip1, self.skip2 = nn.Conv2d(16, 64, 3, padding=1), nn.Conv2d(64, 128, 3, padding=1)
        self.conv_full_1, self.conv_full_2 = nn.Conv2d(384, 256, 3, padding=1), nn.Conv2d(256, 256, 3, padding=1)
        self.logits = nn.Conv2d(256, 3, 1)
class DeepLab2018(nn.Module):
    def __init__(self):
        super().__init__()
        self.resnet, self.aspp, self.decoder = ResNet(), ASPP(), Decoder()
    def forward(self, inp):
        x, low = self.resnet(inp)
        d = self.decoder
        x = deconv_same(d.deconv1, self.aspp(x))
        x = torch.cat([x, conv_bn(d.low_level_features.conv_1x1, low)], 1)
        x = conv_bn(d.conv_3x3_2, conv_bn(d.conv_3x3_1, x))
        x = deconv_same(d.deconv3, deconv_same(d.deconv2, x))
        skip = d.skip2(d.skip1(inp))
        x = d.conv_full_2(d.conv_full_1(torch.cat([x, skip], 1)))
        return d.logits(x)

def ours_params(model):
    out = subprocess.run([os.path.join(here, "..", "bin", "cf-check"), "--model", model, "--summary"], capture_output=True, text=True).stdout
    return int(out.strip().splitlines()[-1].split()[1])
count = lambda m: sum(p.numel() for p in m.parameters())
cosmo, deeplab = Cosmo2018(), DeepLab2018()
lines = []
for name, net in (("cosmoflow-2018.cfg", cosmo), ("deeplab-resnet50-2018.cfg", deeplab)):
    ours = ours_params(os.path.join(here, "..", "models", name))
    check(ours == count(net), "%s: %d parameters, the PyTorch build %d" % (name, ours, count(net)))
    lines.append("%s %d (PyTorch build: %d)" % (name, ours, count(net)))
open(os.path.join(here, "ref", "params_2018.txt"), "w").write("# written by tests/torch_2018.py\n" + "\n".join(lines) + "\n")

def torch_tensors(model, net):
    """(layer, kind, parameter) in our network order: from the '# torch:' comments, or for a
    cfg without them the layers with parameters in order against the module's parameters"""
    text = open(model).read().splitlines()
    out, layer, pending, sec, kv = [], -1, None, None, {}
    secs = []
    for line in text + ["[end]"]:
        line = line.strip()
        if line.startswith("# torch:"): pending = line.split(":", 1)[1].strip()
        elif line.startswith("["):
            if sec and sec != "net": secs.append((layer, sec, kv, cur))
            sec, kv, cur = line[1:-1], {}, pending; pending = None
            if sec not in ("net", "end"): layer += 1
        elif "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1); kv[k] = v
    mods = [m for m in net.modules() if isinstance(m, (nn.Conv3d, nn.Linear))]
    for (l, s, kv, tname) in secs:
        if s not in ("conv", "dense", "deconv"): continue
        m = net.get_submodule(tname) if tname else mods.pop(0)
        out.append((l, "weight", m.weight))
        if kv.get("bias", "1") == "1": out.append((l, "bias", m.bias))
    return out

def compare(name, net, shape, x, target, loss_fn):
    model = os.path.join(here, "..", "models", name)
    net = net.to(dt)
    ts = torch_tensors(model, net)
    tmp = tempfile.mkdtemp(prefix="cf-torch-2018-")
    wdir = os.path.join(tmp, "w"); os.makedirs(wdir)
    nm = lambda k, l, kd: "%03d_%d_%s.npy" % (k, l, kd)
    with torch.no_grad():
        for k, (l, kd, t) in enumerate(ts):
            np.save(os.path.join(wdir, nm(k, l, kd)), t.numpy().astype(np.float32))
            t.copy_(torch.tensor(np.load(os.path.join(wdir, nm(k, l, kd))), dtype=dt))
    np.save(os.path.join(tmp, "x.npy"), x); np.save(os.path.join(tmp, "y.npy"), target)
    n32 = copy.deepcopy(net).float()   # before any forward (which keeps non-leaf tensors on modules)
    out = net(torch.tensor(x, dtype=dt))
    loss = loss_fn(out, target)
    loss.backward()
    # PyTorch's own float32 gradients: over 10^5-10^6 positions per weight, float32 sums have
    # errors above 1e-4 (CosmoFlow's first convolutions: 4e-4 to 8e-4); a tensor is held to
    # max(1e-4, 1.5 x PyTorch float32's error on it)
    n32.zero_grad()
    loss_fn(n32(torch.tensor(x)), target, torch.float32).backward()
    g32 = dict(n32.named_parameters())
    name_of = {id(p): n for n, p in net.named_parameters()}
    run = lambda *a: subprocess.run(a, check=True, stdout=subprocess.DEVNULL)
    for b in os.environ.get("CF_BINS", "bin").split():   # the tool directories to check
        bin_, tag = os.path.join(here, "..", b), "" if b == "bin" else " (%s)" % os.path.basename(b.rstrip("/"))
        ck, d = os.path.join(tmp, "w.cfck"), os.path.join(tmp, "d-" + os.path.basename(b))
        run(os.path.join(bin_, "cf-convert"), "weights-import", "--model", model, "--input-shape", shape, "--npy", wdir, "--out", ck)
        run(os.path.join(bin_, "cf-check"), "--weights", ck, "--input", os.path.join(tmp, "x.npy"), "--target", os.path.join(tmp, "y.npy"), "--dump", d)
        e = relerr(np.load(os.path.join(d, "output.npy")), out.detach().numpy())
        check(e <= 1e-4, "%s at %s%s: output relative error %.2e" % (name, shape, tag, e))
        print("agree %s_output%s %.3g 1e-04" % (name, tag.replace(" ", "_"), e))
        e = abs(float(open(os.path.join(d, "loss.txt")).read()) - loss.item()) / abs(loss.item())
        check(e <= 1e-4, "%s at %s%s: loss relative error %.2e" % (name, shape, tag, e))
        print("agree %s_loss%s %.3g 1e-04" % (name, tag.replace(" ", "_"), e))
        worst, bad, tight = (0.0, ""), [], (0.0, 0.0, 1e-4)   # tight: the tensor nearest its bound (ratio, error, bound)
        for k, (l, kd, t) in enumerate(ts):
            e = relerr(np.load(os.path.join(d, "grad", nm(k, l, kd))), t.grad.numpy())
            e32 = relerr(g32[name_of[id(t)]].grad.double().numpy(), t.grad.numpy())
            worst = max(worst, (e, nm(k, l, kd)))
            tight = max(tight, (e / max(1e-4, 1.5 * e32), e, max(1e-4, 1.5 * e32)))
            if e > max(1e-4, 1.5 * e32): bad.append("%s %.2e (PyTorch float32 %.2e)" % (nm(k, l, kd), e, e32))
        check(not bad, "%s at %s%s: %d gradient tensors, worst relative error %.2e (%s)%s" % (name, shape, tag, len(ts), worst[0], worst[1],
              "; " + ", ".join(bad[:4]) if bad else ""))
        print("agree %s_gradients_(%d_tensors,_the_one_nearest_its_bound_max(1e-4,_1.5x_PyTorch_float32's_error))%s %.3g %.1e" % (
            name, len(ts), tag.replace(" ", "_"), tight[1], tight[2]))
    subprocess.run(["rm", "-rf", tmp])

x = (torch.rand(1, 1, 112, 112, 112, dtype=dt) * 2).numpy().astype(np.float32)
y = (torch.rand(1, 3, dtype=dt) * 2 - 1).numpy().astype(np.float32)
compare("cosmoflow-2018.cfg", Cosmo2018(flat=256), "1x112x112x112", x, y, lambda o, t, d=dt: F.l1_loss(o, torch.tensor(t, dtype=d)))
w2018 = torch.tensor([0.021797, 0.812048, 0.166155], dtype=dt)
x = torch.rand(1, 16, 32, 48, dtype=dt).numpy().astype(np.float32)
y = torch.randint(0, 3, (1, 32, 48)).numpy().astype(np.float32)
compare("deeplab-resnet50-2018.cfg", deeplab, "16x32x48", x, y,
        lambda o, t, d=dt: torch.mean(F.cross_entropy(o, torch.tensor(t).long(), weight=w2018.to(d), reduction="none")))
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
