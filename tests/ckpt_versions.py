#!/usr/bin/python3
"""Rewrites a cosmoflow.h checkpoint (format 3) in the older formats 2 and 1, from the layout
docs/formats.md describes, read here independently of the C code.  Used by tests/test_tools.sh
to check that checkpoints of earlier releases are still read (and shown by cf-check --info).

usage: ckpt_versions.py IN.cfck OUT_PREFIX   -> OUT_PREFIX.v2.cfck, OUT_PREFIX.v1.cfck
"""
import struct, sys

def crc32c(data, crc=0):
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord and the checkpoints use"""
    table = crc32c.table
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
crc32c.table = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    crc32c.table.append(c)

def read_v3(b):
    assert b[:8] == b"CFCKPT03", b[:8]
    assert struct.unpack("<I", b[-4:])[0] == crc32c(b[:-4]), "CRC mismatch"
    o = 8
    (cfg_len,) = struct.unpack_from("<Q", b, o); o += 8
    cfg = b[o:o + cfg_len]; o += cfg_len
    shape = b[o:o + 16]; o += 16
    n_params, step, epoch, seed, n_stats = struct.unpack_from("<5Q", b, o); o += 40
    best = b[o:o + 8]; o += 8
    (meta_len,) = struct.unpack_from("<I", b, o); o += 4 + meta_len
    params = b[o:o + 4 * n_params]; o += 4 * n_params
    stats = b[o:o + 4 * n_stats]; o += 4 * n_stats
    opt = b[o:o + 8 * n_params]; o += 8 * n_params
    assert o == len(b) - 4, (o, len(b))
    return dict(cfg=cfg, shape=shape, u=(n_params, step, epoch, seed, n_stats), best=best,
                params=params, stats=stats, opt=opt)

def write(path, c, version):
    n_params, step, epoch, seed, n_stats = c["u"]
    body = b"CFCKPT0%d" % version + struct.pack("<Q", len(c["cfg"])) + c["cfg"] + c["shape"]
    body += struct.pack("<5Q", n_params, step, epoch, seed, n_stats if version >= 2 else 0) + c["best"]
    body += c["params"]
    if version >= 2:
        body += c["stats"] + c["opt"]
    else:                      # format 1: no statistics, one optimizer slot (SGD's momentum)
        assert n_stats == 0, "format 1 has no batch-norm statistics"
        body += c["opt"][:4 * n_params]
    open(path, "wb").write(body + struct.pack("<I", crc32c(body)))

if __name__ == "__main__":
    c = read_v3(open(sys.argv[1], "rb").read())
    write(sys.argv[2] + ".v2.cfck", c, 2)
    if c["u"][4] == 0:
        write(sys.argv[2] + ".v1.cfck", c, 1)
