# What the tools write (sourced by tests/test_hostile.sh, whose helpers, inputs $I, outputs $O
# and commands $TR, $EV, $B it uses): families 25 to 28.  A converter names all its outputs
# before it writes one; no output lands among the data a run reads under a name the readers
# take; an append keeps one sample shape per set; a degenerate shape is refused by name, and a
# failed converter leaves no directory it made.
HF="$PY tests/hostile_files.py"
# gone NAME PATH: the refused case before it left nothing at PATH
gone() { count; [ ! -e "$2" ] && ok || bad "[$family] $1: $2 was left behind: $(ls "$2" 2>/dev/null | head -3 | tr '\n' ' ')"; }
if $PY -c 'import h5py' 2>/dev/null && ldd $B/cf-convert | grep -q libhdf5; then H5=1; else H5=; echo "skipped: HDF5 cases of families 25 to 28 (python3-h5py or an HDF5 build missing)"; fi

# ---- 25. two inputs, one output name: refused naming both, before anything is written
family=25
mkdir -p "$I/a" "$I/b"
cp "$(ls "$I"/va/*.tfrecord | head -1)" "$I/a/x.tfrecord"; cp "$(ls "$I"/va/*.tfrecord | tail -1)" "$I/b/x.tfrecord"
refused "tfrecord2npy of a/x.tfrecord and b/x.tfrecord" "a/x.tfrecord and .*b/x.tfrecord: would both be written as .*x_data.npy" \
    $B/cf-convert tfrecord2npy "$I/a/x.tfrecord" "$I/b/x.tfrecord" --out "$O/t2"
gone "tfrecord2npy of two records of one name" "$O/t2"
refused "tfrecord2npy of one record given twice" "a/x.tfrecord: is given twice" $B/cf-convert tfrecord2npy "$I/a/x.tfrecord" "$I/a/x.tfrecord" --out "$O/t3"
cp "$I/a/x.tfrecord" "$I/b/y.tfrecord" && cp "$I/a/x.tfrecord" "$I/b/y.tfrecord.gz"   # (cf-synth writes gzip records)
refused "tfrecord2npy of y.tfrecord and y.tfrecord.gz (one stem)" "would both be written as .*y_data.npy" \
    $B/cf-convert tfrecord2npy "$I/b/y.tfrecord" "$I/b/y.tfrecord.gz" --out "$O/t4"
if [ -n "$H5" ]; then
    mkdir -p "$I/run1/sim" "$I/run2/sim"
    $HF universe "$I/run1/sim/univ.hdf5" ok && $HF universe "$I/run2/sim/univ.hdf5" ok 8
    refused "universe --whole of run1/sim/univ.hdf5 and run2/sim/univ.hdf5" "run1/sim/univ.hdf5 and .*run2/sim/univ.hdf5: would both be written as .*sim_univ_data.npy" \
        $B/cf-convert universe "$I/run1/sim/univ.hdf5" "$I/run2/sim/univ.hdf5" --whole --out "$O/u2"
    gone "universe --whole of two universes of one name" "$O/u2"
    refused "universe (sub-volumes) of run1/sim/univ.hdf5 and run2/sim/univ.hdf5" "would both be written as .*sim_univ_000.tfrecord" \
        $B/cf-convert universe "$I/run1/sim/univ.hdf5" "$I/run2/sim/univ.hdf5" --out "$O/u3"
    gone "universe of two universes of one name" "$O/u3"
    cp "$I/run1/sim/univ.hdf5" "$I/run1/sim/univ.h5"
    refused "universe of univ.hdf5 and univ.h5 in one directory" "would both be written as" \
        $B/cf-convert universe "$I/run1/sim/univ.hdf5" "$I/run1/sim/univ.h5" --whole --out "$O/u4"
    refused "universe of one file given twice" "run1/sim/univ.hdf5: is given twice" \
        $B/cf-convert universe "$I/run1/sim/univ.hdf5" "$I/run1/sim/univ.hdf5" --out "$O/u5"
    mkdir -p "$I/h5a" "$I/h5b"
    $HF snapshot "$I/h5a/data-1.h5" 4 6 2 && $HF snapshot "$I/h5b/1.h5" 4 6 2
    refused "h52npy of data-1.h5 and 1.h5 (both data-1.npy)" "h5a/data-1.h5 and .*h5b/1.h5: would both be written as .*data-1.npy" \
        $B/cf-convert h52npy "$I/h5a/data-1.h5" "$I/h5b/1.h5" --out "$O/h2"
    gone "h52npy of two snapshots of one name" "$O/h2"
    $PY -c "import h5py, numpy as np, sys
for d in sys.argv[1:]:
    with h5py.File(d + '/stats.h5', 'w') as f: f['climate/minval'] = np.zeros(2, np.float32); f['climate/maxval'] = np.ones(2, np.float32)" "$I/h5a" "$I/h5b"
    refused "h52npy of two stats.h5 of two directories" "h5a/stats.h5 and .*h5b/stats.h5: would both be written as .*stats_m[a-z]*val.npy" \
        $B/cf-convert h52npy "$I/h5a/data-1.h5" "$I/h5a/stats.h5" "$I/h5b/stats.h5" --out "$O/h4"
    accepted "h52npy of a snapshot: the summary counts the snapshots written" $B/cf-convert h52npy "$I/h5a/data-1.h5" --out "$O/h3"
    count; grep -q "1 files -> 1 snapshots in" "$T/stdout" && ok || bad "[25] h52npy's summary: $(cat "$T/stdout")"
    rm -rf "$I/run1" "$I/run2" "$I/h5a" "$I/h5b" "$O/h3"
fi
rm -rf "$I/a" "$I/b"

# ---- 26. no output named like a sample or a label inside a directory the run reads as data
family=26
refused "cf-train --mllog into the validation directory as log_data.npy" "is named like a sample and is inside the input directory" \
    $TR --model "$I/m.cfg" --out "$O/m1.cfck" --mllog "$I/va/log_data.npy"
refused "cf-train --out into the training directory as run_data.npy" "is named like a sample and is inside the input directory" \
    $TR --model "$I/m.cfg" --out "$I/tr/run_data.npy"
refused "cf-train --out into the training directory as run.tfrecord" "is named like a sample" $TR --model "$I/m.cfg" --out "$I/tr/run.tfrecord"
refused "cf-train --mllog into the training directory as label-x.npy" "is named like a label file" \
    $TR --model "$I/m.cfg" --out "$O/m2.cfck" --mllog "$I/tr/label-x.npy"
refused "cf-eval --pred into the data directory as p_data.npy" "is named like a sample and is inside the input directory" \
    $EV --weights "$I/c.cfck" --data "$I/va" --pred "$I/va/p_data.npy"
refused "cf-eval --pred into the data directory as p_label.npy" "is named like a label file" \
    $EV --weights "$I/c.cfck" --data "$I/va" --pred "$I/va/p_label.npy"
ln -s "$I/va" "$O/valink"
refused "cf-eval --pred through a link to the data directory" "is inside the input directory" \
    $EV --weights "$I/c.cfck" --data "$I/va" --pred "$O/valink/p_data.npy"
refused "cf-eval --spectrum-dump into the spectrum's directory as s_data.npy" "is named like a sample" \
    $EV --weights "$I/c.cfck" --data "$I/va" --spectrum "$I/tr" --spectrum-dump "$I/tr/s_data.npy"
refused "cf-eval --pred into the --baseline directory as data-p.npy" "is named like a sample" \
    $EV --weights "$I/c.cfck" --data "$I/va" --baseline "$I/tr" --pred "$I/tr/data-p.npy"
rm -f "$O/valink"

# ---- 27. an append checks the set's sample shape before its first write, in every writer
family=27
if [ -n "$H5" ]; then
    $HF universe "$I/u8.hdf5" ok 8 && $HF universe "$I/u12.hdf5" ok 12 && $HF universe "$I/u16.hdf5" ok 16
    $B/cf-convert universe "$I/u8.hdf5" --whole --out "$I/w8" > /dev/null 2>&1
    refused "universe --whole --append of a 12^3 universe to a set of 8^3" "its samples are 8^3 x 4 with 4 labels, .*u12.hdf5 makes 12^3" \
        $B/cf-convert universe "$I/u12.hdf5" --whole --out "$I/w8" --append
    refused "universe --append --plain of 2^3 sub-volumes to a set of 8^3" "one set holds samples of one shape" \
        $B/cf-convert universe "$I/u8.hdf5" --plain --out "$I/w8" --append
    mkdir -p "$I/s16" && cp "$I"/va/*.tfrecord "$I/s16/"
    refused "universe --append of 4^3 sub-volumes to a set of 16^3 records" "its samples are 16^3 x 4" \
        $B/cf-convert universe "$I/u16.hdf5" --out "$I/s16" --append
    refused "universe --whole of an 8^3 and a 12^3 universe into one set" "one set holds samples of one shape" \
        $B/cf-convert universe "$I/u8.hdf5" "$I/u12.hdf5" --whole --out "$O/mixed"
    gone "universe of two shapes" "$O/mixed"
    $HF snapshot "$I/data-small.h5" 8 12 4 && $HF snapshot "$I/data-other.h5" 8 16 4
    refused "h52npy --append of an 8x12x4 snapshot to a set of 32x48x16" "its samples are 32x48x16 (H, W, C)" \
        $B/cf-convert h52npy "$I/data-small.h5" --out "$I/ctr" --append
    refused "h52npy of snapshots of two shapes into one set" "one set holds samples of one shape" \
        $B/cf-convert h52npy "$I/data-small.h5" "$I/data-other.h5" --out "$O/hmixed"
    rm -rf "$I/u8.hdf5" "$I/u12.hdf5" "$I/u16.hdf5" "$I/w8" "$I/s16" "$I/data-small.h5" "$I/data-other.h5"
fi

# ---- 28. degenerate shapes refused by name; a failed converter leaves no directory it made
family=28
if [ -n "$H5" ]; then
    $HF universe "$I/empty.hdf5" empty && $HF universe "$I/u6.hdf5" ok 6 && $HF universe "$I/u8.hdf5" ok 8 && $HF universe "$I/neg.hdf5" negative 8
    refused "universe --whole of an empty universe (0,0,0,4)" "'full' is (0,0,0,4): an empty universe" \
        $B/cf-convert universe "$I/empty.hdf5" --whole --out "$O/e1"
    gone "universe --whole of an empty universe" "$O/e1"
    refused "universe of an empty universe (0,0,0,4)" "an empty universe" $B/cf-convert universe "$I/empty.hdf5" --out "$O/e2"
    gone "universe of an empty universe" "$O/e2"
    refused "universe of a 6^3 universe (no 64 sub-volumes)" "'full' is (6,6,6,4): for 64 sub-volumes N must be divisible by 4" \
        $B/cf-convert universe "$I/u6.hdf5" --out "$O/e3/new/dir"
    gone "universe of a 6^3 universe (with new parents)" "$O/e3"
    refused "universe of a good file and then a negative count" "is -3: particle counts cannot be negative" \
        $B/cf-convert universe "$I/u8.hdf5" "$I/neg.hdf5" --out "$O/e4"
    gone "universe that fails at its second file" "$O/e4"
    $HF snapshot "$I/data-zero.h5" 0 4 2 && $HF snapshot "$I/data-nochan.h5" 4 4 0
    refused "h52npy of a snapshot with H = 0" "climate/data is (0,4,2): each of H, W and C from 1" $B/cf-convert h52npy "$I/data-zero.h5" --out "$O/e5"
    gone "h52npy of a snapshot with H = 0" "$O/e5"
    refused "h52npy of a snapshot with no channels" "climate/data is (4,4,0)" $B/cf-convert h52npy "$I/data-nochan.h5" --out "$O/e6"
    rm -f "$I/empty.hdf5" "$I/u6.hdf5" "$I/u8.hdf5" "$I/neg.hdf5" "$I/data-zero.h5" "$I/data-nochan.h5"
fi
$HF tfrecord "$I/zero.tfrecord" 0 0.5
refused "tfrecord2npy of a record of an empty volume" "zero.tfrecord" $B/cf-convert tfrecord2npy "$I/zero.tfrecord" --out "$O/e7"
gone "tfrecord2npy of an empty volume" "$O/e7"
rm -f "$I/zero.tfrecord"
