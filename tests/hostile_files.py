#!/usr/bin/python3
"""Writes the hostile files tests/test_hostile.sh feeds the tools, each well formed (correct
CRCs, valid HDF5) and wrong in one way, from the formats docs/formats.md describes:

  hostile_files.py ckpt IN.cfck OUT.cfck FIELD=VALUE   a format-3 checkpoint with one field
        changed and its CRC32C recomputed: opt0=nan (the first optimizer value), best=nan,
        best=-inf, epoch=N, step=N, meta=OLD>NEW (in the training record, NEW as long as OLD)
  hostile_files.py tfrecord OUT.tfrecord S LABEL        a CosmoFlow record of an SxSxSx4
        volume of ones whose first label is LABEL (e.g. nan)
  hostile_files.py universe OUT.hdf5 KIND [N]           a raw N^3 x 4 universe (N: 8): KIND nan-label
        (unitPar[1] NaN), float-density ('full' float32 in [0, 1)), negative (a count -3),
        ok (a good one), empty ('full' of shape (0,0,0,4))
  hostile_files.py snapshot OUT.h5 H W C                a DeepCAM snapshot: climate/data (H,W,C)
        float32, climate/labels_0 (H,W) of class ids
"""
import math, struct, sys
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ckpt_versions import crc32c

def ckpt(src, dst, edit):
    b = bytearray(open(src, "rb").read())
    assert b[:8] == b"CFCKPT03" and struct.unpack("<I", b[-4:])[0] == crc32c(bytes(b[:-4]))
    o = 8
    (cfg_len,) = struct.unpack_from("<Q", b, o); o += 8 + cfg_len + 16
    head = o                                  # n_params, step, epoch, seed, n_stats
    n_params, _, _, _, n_stats = struct.unpack_from("<5Q", b, o); o += 40
    best = o; o += 8
    (meta_len,) = struct.unpack_from("<I", b, o); o += 4 + meta_len
    opt = o + 4 * (n_params + n_stats)
    key, value = edit.split("=", 1)
    if key == "meta":
        old, new = value.split(">")
        at = b.find(old.encode(), best + 12)
        assert len(old) == len(new) and 0 <= at < best + 12 + meta_len
        b[at:at + len(old)] = new.encode()
    elif key == "opt0": struct.pack_into("<f", b, opt, float(value))
    elif key == "best": struct.pack_into("<d", b, best, float(value))
    elif key == "step": struct.pack_into("<Q", b, head + 8, int(value))
    elif key == "epoch": struct.pack_into("<Q", b, head + 16, int(value))
    else: raise SystemExit("unknown field " + key)
    struct.pack_into("<I", b, len(b) - 4, crc32c(bytes(b[:-4])))
    open(dst, "wb").write(b)

def varint(n):
    out = b""
    while n >= 0x80: out += bytes([n & 0x7F | 0x80]); n >>= 7
    return out + bytes([n])
def field(num, payload): return varint(num << 3 | 2) + varint(len(payload)) + payload
def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def tfrecord(dst, S, label):
    x = struct.pack("<%dh" % (S * S * S * 4), *([1] * (S * S * S * 4)))
    y = struct.pack("<4f", float(label), 0.0, 0.0, 0.0)
    ex = field(1, field(1, field(1, b"x") + field(2, field(1, field(1, x)))) +
                  field(1, field(1, b"y") + field(2, field(2, field(1, y)))))
    n = struct.pack("<Q", len(ex))
    open(dst, "wb").write(n + struct.pack("<I", masked(n)) + ex + struct.pack("<I", masked(ex)))

def universe(dst, kind, N=8):
    import h5py, numpy as np
    full = np.ones((N, N, N, 4), np.int16)
    par = np.array([0.25, -0.5, 0.75, -1.0], np.float32)
    if kind == "nan-label": par[1] = np.nan
    elif kind == "float-density": full = np.random.default_rng(1).random((N, N, N, 4)).astype(np.float32)
    elif kind == "negative": full[1, 2, 3, 0] = -3
    elif kind == "empty": full = np.zeros((0, 0, 0, 4), np.int16)
    elif kind != "ok": raise SystemExit("unknown kind " + kind)
    with h5py.File(dst, "w") as f:
        f["full"] = full
        f["unitPar"] = par

def snapshot(dst, H, W, C):
    import h5py, numpy as np
    with h5py.File(dst, "w") as f:
        f["climate/data"] = np.random.default_rng(2).random((H, W, C)).astype(np.float32)
        f["climate/labels_0"] = (np.arange(H * W) % 3).reshape(H, W).astype(np.float32)

if __name__ == "__main__":
    what = sys.argv[1]
    if what == "ckpt": ckpt(sys.argv[2], sys.argv[3], sys.argv[4])
    elif what == "tfrecord": tfrecord(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif what == "universe": universe(sys.argv[2], sys.argv[3], *[int(v) for v in sys.argv[4:5]])
    elif what == "snapshot": snapshot(sys.argv[2], *[int(v) for v in sys.argv[3:6]])
    else: raise SystemExit(__doc__)
