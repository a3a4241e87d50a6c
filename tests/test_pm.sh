#!/bin/sh
# The particle-mesh universes (cf-synth cosmo --lpt, --pm) against physics: linear growth on the
# box's largest scales, growth above linear on small scales at z = 0 (collapse, as in N-body;
# Lagrangian perturbation theory alone stays below), halos in the counts, the count
# distribution of the real records (when CF_FIXTURES has them), same seed same bytes.
# Last line: "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
B=${CF_BIN:-bin}
T=$(mktemp -d /tmp/cf-pm-XXXXXX)
trap 'rm -rf "$T"' EXIT
PY=/usr/bin/python3
FIX=${CF_FIXTURES:-data/fixtures/cosmoflow}
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
if ! $B/cf-synth cosmo --help 2>&1 | grep -q -- '--pm '; then echo "skipped: particle-mesh universes (cf-synth built without FFTW: apt-get install libfftw3-dev, then make)"; echo "0 passed, 0 failed"; exit 0; fi
$PY -c 'import numpy' 2>/dev/null || { echo "skipped: particle-mesh physics (python3-numpy absent)"; echo "0 passed, 0 failed"; exit 0; }

# the power spectra of the counts at z = 0 and z = 3 in bands of |k| (fundamental
# frequencies), and the linear growth ratio (D(z=0) / D(z=3))^2 from the growth equation
cat > "$T/pk.py" <<'EOF'
import sys, glob, numpy as np
def growth(om, a_out):
    """D(a) at a_out by RK4 of D'' + (3/a + E'/E) D' = 1.5 om D / (a^5 E^2), D = a early"""
    E = lambda a: np.sqrt(om / a**3 + 1 - om)
    f = lambda a, y: np.array([y[1], -(3 / a - 1.5 * om / (a**4 * E(a)**2)) * y[1] + 1.5 * om / (a**5 * E(a)**2) * y[0]])
    a, y, h, out = 1e-3, np.array([1e-3, 1.0]), 1e-4, {}
    while a < 1 - 1e-9:
        for t in a_out:
            if t not in out and a >= t - h / 2: out[t] = y[0]
        k1 = f(a, y); k2 = f(a + h / 2, y + h / 2 * k1); k3 = f(a + h / 2, y + h / 2 * k2); k4 = f(a + h, y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4); a += h
    out[1.0] = y[0]
    return out
def band_power(d, lo, hi):
    r = []
    for fn in sorted(glob.glob(d + "/*_data.npy")):
        x = np.load(fn).astype(np.float64); S = x.shape[0]
        P = np.abs(np.fft.rfftn(x / x.mean(axis=(0, 1, 2)) - 1, axes=(0, 1, 2))) ** 2
        k = np.fft.fftfreq(S) * S; kr = np.fft.rfftfreq(S) * S
        kk = np.sqrt(k[:, None, None] ** 2 + k[None, :, None] ** 2 + kr[None, None, :] ** 2)
        r.append(P[(kk >= lo) & (kk < hi)].mean(0))
    return np.array(r).mean(0)   # per channel: z = 0, 0.5, 1.5, 3
D = growth(0.3, [0.25, 0.4])
low, high = band_power(sys.argv[1], 1, 1.5), band_power(sys.argv[1], 8, 16)
# each: the growth of power from z = 3 over linear theory's (D(z) / D(3))^2
print("low15 %.4f" % (low[2] / low[3] / (D[0.4] / D[0.25]) ** 2))
print("low0 %.4f" % (low[0] / low[3] / (D[1.0] / D[0.25]) ** 2))
print("high0 %.4f" % (high[0] / high[3] / (D[1.0] / D[0.25]) ** 2))
EOF
ratio() { awk -v k="$2" '$1 == k {print $2}' "$1"; }
SYN="--size 32 --voxel 2 --fix 0,1,2,3 --samples 3 --seed 4 --format npy"
$B/cf-synth cosmo --out "$T/pm" --pm 10 $SYN > /dev/null && $PY "$T/pk.py" "$T/pm" > "$T/pm.txt" &&
$B/cf-synth cosmo --out "$T/lpt" --lpt 2 $SYN > /dev/null && $PY "$T/pk.py" "$T/lpt" > "$T/lpt.txt" || bad "particle-mesh and 2LPT universes"
l15=$(ratio "$T/pm.txt" low15); l0=$(ratio "$T/pm.txt" low0); hi=$(ratio "$T/pm.txt" high0); lhi=$(ratio "$T/lpt.txt" high0)
echo "  PM: growth of power from z = 3 over linear theory's: largest scales to z = 1.5 $l15, to z = 0 $l0; |k| 8-16 to z = 0 $hi (2LPT alone: $lhi)"
awk -v r="$l15" 'BEGIN {exit !(r > 0.97 && r < 1.03)}' && ok || bad "linear growth on the largest scales, z = 3 to 1.5, within 3 %: $l15"
awk -v r="$l0" 'BEGIN {exit !(r > 0.9 && r < 1.1)}' && ok || bad "near-linear growth on the largest scales to z = 0 (mode coupling in a 64 Mpc/h box), within 10 %: $l0"
awk -v r="$hi" 'BEGIN {exit !(r > 1.5)}' && ok || bad "small scales grow above linear at z = 0 (collapse): $hi"
awk -v r="$lhi" 'BEGIN {exit !(r < 1)}' && ok || bad "2LPT alone stays below linear on small scales: $lhi"

# halos at the real resolution (1 particle per voxel): counts far above the mean at z = 0
$B/cf-synth cosmo --out "$T/r1" --samples 2 --size 64 --voxel 1 --pm 10 --seed 3 --format npy > /dev/null &&
$B/cf-synth cosmo --out "$T/r2" --samples 2 --size 64 --voxel 1 --pm 10 --seed 3 --format npy > /dev/null || bad "64^3 universes at voxel 1"
cmp -s "$T/r1/synth_3_000001_data.npy" "$T/r2/synth_3_000001_data.npy" && ok || bad "same seed, same bytes"
cat > "$T/counts.py" <<'EOF'
import sys, glob, numpy as np
def load(d, c): return np.concatenate([np.load(f)[..., c].ravel() for f in sorted(glob.glob(d + "/*_data.npy"))])
g = load(sys.argv[1], 0)
print("synthetic z=0: empty %.3f max %d p99.9 %.0f" % ((g == 0).mean(), g.max(), np.percentile(g, 99.9)))
if len(sys.argv) > 2:   # against the real records: KS distance of the count distributions, per channel
    for c in range(4):
        g, r = load(sys.argv[1], c), load(sys.argv[2], c)
        m = int(max(g.max(), r.max())) + 1
        ks = np.abs(np.cumsum(np.bincount(g, minlength=m)) / g.size - np.cumsum(np.bincount(r, minlength=m)) / r.size).max()
        print("channel %d: KS %.3f empty %.3f real %.3f max %d real %d p99.9 %.0f real %.0f" % (c, ks, (g == 0).mean(), (r == 0).mean(), g.max(), r.max(), np.percentile(g, 99.9), np.percentile(r, 99.9)))
EOF
$PY "$T/counts.py" "$T/r1" > "$T/c.txt" && awk '/^synthetic/ {exit !($5 >= 300 && $7 >= 40)}' "$T/c.txt" && ok || bad "halos at z = 0: max count >= 300, 99.9th percentile >= 40: $(cat "$T/c.txt")"
if [ -f "$FIX/21688988_univ_ics_2019-03_a10018182_006.tfrecord" ]; then
    $B/cf-convert tfrecord2npy "$FIX"/*.tfrecord --out "$T/real" > /dev/null && $PY "$T/counts.py" "$T/r1" "$T/real" > "$T/cr.txt" &&
        sed 's/^/  PM against the real records: /' "$T/cr.txt" | grep channel
    awk '/^channel/ {if ($4 > 0.08 || $6 - $8 > 0.1 || $8 - $6 > 0.1) bad = 1; n++} END {exit bad || n != 4}' "$T/cr.txt" && ok ||
        bad "count distributions near the real records' (KS <= 0.08, empty fraction within 10 points, every channel): $(cat "$T/cr.txt")"
else
    echo "not checked: counts against real CosmoFlow records ($FIX absent; set CF_FIXTURES, data/README.md)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
