"""The MLPerf HPC DeepCAM network in PyTorch, with the module structure and names of the
reference's deepcam/src/deepCam/architecture/deeplab_xception.py (v1.0+, post-activation
Xception blocks, output stride 16).  The image-pool branch is tiled to the feature map's size
(the reference hard-codes 48x72, i.e. 768x1152 input), so any input size divisible by 16 works.
Used by tests/torch_deepcam.py (the reference for models/deepcam.cfg) and bench/torch_peer.py."""
import torch, torch.nn as nn, torch.nn.functional as F

class SepConv(nn.Module):             # depthwise 3x3 then pointwise 1x1, no BN between
    def __init__(self, cin, cout, stride=1, dilation=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cin, 3, stride, dilation, dilation, groups=cin, bias=False)
        self.pointwise = nn.Conv2d(cin, cout, 1, bias=False)
    def forward(self, x):
        return self.pointwise(self.conv1(x))

class Block(nn.Module):               # post-activation Xception block (reference v1.0)
    def __init__(self, cin, cout, reps, stride=1, dilation=1, grow_first=True, is_last=False, end_with_relu=True):
        super().__init__()
        rep, f = [], cin
        if grow_first:
            rep += [SepConv(cin, cout, 1, dilation), nn.BatchNorm2d(cout), nn.ReLU()]; f = cout
        for _ in range(reps - 1):
            rep += [SepConv(f, f, 1, dilation), nn.BatchNorm2d(f), nn.ReLU()]
        if not grow_first:
            rep += [SepConv(cin, cout, 1, dilation), nn.BatchNorm2d(cout), nn.ReLU()]
        rep = rep[:-1]                # the last ReLU is dropped
        if stride != 1:
            rep.append(SepConv(cout, cout, 2))
        elif is_last:
            rep.append(SepConv(cout, cout, 1))
        self.rep = nn.Sequential(*rep)
        if cout != cin or stride != 1:
            self.skip = nn.Conv2d(cin, cout, 1, stride, bias=False)
            self.skipbn = nn.BatchNorm2d(cout)
        else:
            self.skip = None
        self.end_with_relu = end_with_relu
    def forward(self, x):
        s = self.skipbn(self.skip(x)) if self.skip is not None else x
        y = self.rep(x) + s
        return F.relu(y) if self.end_with_relu else y

class Xception(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(16, 32, 3, 2, 1, bias=False); self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, 1, 1, bias=False); self.bn2 = nn.BatchNorm2d(64)
        self.block1 = Block(64, 128, 2, 2, end_with_relu=False)
        self.block2 = Block(128, 256, 2, 2)
        self.block3 = Block(256, 728, 2, 2, is_last=True)
        for i in range(4, 20):
            setattr(self, "block%d" % i, Block(728, 728, 3))
        self.block20 = Block(728, 1024, 2, grow_first=False, is_last=True, end_with_relu=False)
        self.conv3 = SepConv(1024, 1536, 1, 2); self.bn3 = nn.BatchNorm2d(1536)
        self.conv4 = SepConv(1536, 1536, 1, 2); self.bn4 = nn.BatchNorm2d(1536)
        self.conv5 = SepConv(1536, 2048, 1, 2); self.bn5 = nn.BatchNorm2d(2048)
    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.block1(x)); low = x       # in-place ReLU in the reference: low = relu(block1)
        for i in range(2, 21):
            x = getattr(self, "block%d" % i)(x)
        x = F.relu(self.bn3(self.conv3(x)))
        x = F.relu(self.bn4(self.conv4(x)))
        return F.relu(self.bn5(self.conv5(x))), low

class ASPP(nn.Module):
    def __init__(self, rate):
        super().__init__()
        k = 1 if rate == 1 else 3
        self.atrous_convolution = nn.Conv2d(2048, 256, k, padding=0 if rate == 1 else rate, dilation=rate, bias=False)
        self.bn = nn.BatchNorm2d(256)
    def forward(self, x):
        return F.relu(self.bn(self.atrous_convolution(x)))

class TrainableAffine(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c)); self.bias = nn.Parameter(torch.zeros(c))
    def forward(self, x):
        return x * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)

class Up(nn.Module):
    def __init__(self, cout2, bn2=True):
        super().__init__()
        self.deconv1 = nn.ConvTranspose2d(256, 256, 3, 2, 1, 1, bias=False); self.bn1 = nn.BatchNorm2d(256)
        self.deconv2 = nn.ConvTranspose2d(256, cout2, 3, 2, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout2) if bn2 else None
    def forward(self, x):
        x = self.deconv2(F.relu(self.bn1(self.deconv1(x))))
        return F.relu(self.bn2(x)) if self.bn2 is not None else x

class DeepLab(nn.Module):
    def __init__(self):
        super().__init__()
        self.xception = Xception()
        self.aspp1, self.aspp2, self.aspp3, self.aspp4 = ASPP(1), ASPP(6), ASPP(12), ASPP(18)
        self.global_avg_pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(2048, 256, 1, bias=False), TrainableAffine(256), nn.ReLU())
        self.conv1 = nn.Conv2d(1280, 256, 1, bias=False); self.bn1 = nn.BatchNorm2d(256)
        self.upsample1 = Up(256)
        self.conv2 = nn.Conv2d(128, 48, 1, bias=False); self.bn2 = nn.BatchNorm2d(48)
        self.last_conv = nn.Sequential(nn.Conv2d(304, 256, 3, padding=1, bias=False), nn.BatchNorm2d(256), nn.ReLU(),
                                       nn.Conv2d(256, 256, 3, padding=1, bias=False), nn.BatchNorm2d(256), nn.ReLU(),
                                       nn.Conv2d(256, 256, 1, bias=True))
        self.upsample2 = Up(3, bn2=False)
    def forward(self, x):
        x, low = self.xception(x)
        g = self.global_avg_pool(x).expand(-1, -1, x.shape[2], x.shape[3])   # tiled, as the reference
        x = torch.cat([self.aspp1(x), self.aspp2(x), self.aspp3(x), self.aspp4(x), g], 1)
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.upsample1(x)
        low = F.relu(self.bn2(self.conv2(low)))
        x = self.last_conv(torch.cat([x, low], 1))
        return self.upsample2(x)

