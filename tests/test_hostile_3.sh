# The third round of hostile use (sourced by tests/test_hostile.sh, whose helpers, inputs $I,
# outputs $O and commands $TR, $EV, $B it uses): families 8 to 16, one per cause found.
PYH="$PY tests/hostile_files.py"
R9="$B/cf-train --train $I/tr --val $I/va --no-progress"

# ---- 8. outputs that are devices, FIFOs or links: refused by name, never replaced or moved
family=8
if [ "$(id -u)" = 0 ] && mkdir -p "$I/dev" && mknod "$I/dev/null" c 1 3 && mknod "$I/dev/full" c 1 7; then
    for d in null full; do
        refused "cf-train --out a character device (a node of the $d device made here)" "character device" $TR --model "$I/m.cfg" --out "$I/dev/$d"
    done
    refused "cf-eval --pred a character device" "character device" $EV --weights "$I/c.cfck" --data "$I/va" --pred "$I/dev/null"
    refused "cf-convert extract-cfg --out a character device" "character device" $B/cf-convert extract-cfg "$I/c.cfck" --out "$I/dev/null"
    mkdir -p "$I/wexp" && $B/cf-convert weights-export --weights "$I/c.cfck" --out "$I/wexp" > /dev/null 2>&1
    refused "cf-convert weights-import --out a character device" "character device" $B/cf-convert weights-import --model "$I/m.cfg" --npy "$I/wexp" --out "$I/dev/full"
    refused "--mllog a character device" "character device" $TR --model "$I/m.cfg" --out "$O/a.cfck" --mllog "$I/dev/null"
else echo "skipped: device nodes as outputs (not root: mknod needs it)"; fi
mkfifo "$I/out.fifo"
refused "cf-train --out a FIFO" "a FIFO" $TR --model "$I/m.cfg" --out "$I/out.fifo"
count; [ ! -e "$I/out.fifo.prev" ] && ok || bad "[8] the FIFO was moved to .prev"
sample=$(ls "$I"/tr/*.tfrecord | head -1)
cp "$I/c.cfck" "$O/r.cfck"
ln -s "$sample" "$O/ml.log"
refused "--resume --mllog a symbolic link to a training sample" "$(basename "$sample")" $TR --model "$I/m.cfg" --resume "$O/r.cfck" --out "$O/r.cfck" --epochs 2 --mllog "$O/ml.log"
rm -f "$O/ml.log"; ln "$sample" "$O/ml.log"
refused "--resume --mllog a hard link to a training sample" "$(basename "$sample")" $TR --model "$I/m.cfg" --resume "$O/r.cfck" --out "$O/r.cfck" --epochs 2 --mllog "$O/ml.log"
rm -f "$O/ml.log"

# ---- 9. --resume continues a run with its own settings; a flag that differs is refused
family=9
$B/cf-train --model "$I/m.cfg" --train "$I/tr" --val "$I/va" --batch 2 --epochs 1 --optimizer adam --log-ratio --lr 0.003 --no-progress --out "$O/s.cfck" > /dev/null 2>&1
accepted "--resume with no flags (trained with adam, log-ratio, lr 0.003, batch 2)" $R9 --resume "$O/s.cfck" --out "$O/s.cfck" --epochs 2
count; $B/cf-check --weights "$O/s.cfck" --info > "$T/info.txt" 2>&1
grep -q "optimizer=adam" "$T/info.txt" && grep -q "lr=0.003" "$T/info.txt" && grep -q "transform=log-ratio" "$T/info.txt" && grep -q "global_batch=2" "$T/info.txt" &&
    ok || bad "[9] the resumed run's record keeps adam, lr 0.003, log-ratio, global batch 2: $(grep -E 'optimizer|^  lr|transform|batch' "$T/info.txt" | tr '\n' ' ')"
refused "--resume with --lr 0.001" "trained with lr=0.003" $R9 --resume "$O/s.cfck" --out "$O/s.cfck" --epochs 3 --lr 0.001
refused "--resume with --optimizer sgd" "trained with optimizer=adam" $R9 --resume "$O/s.cfck" --out "$O/s.cfck" --epochs 3 --optimizer sgd
refused "--resume with --no-log" "trained with transform=log-ratio" $R9 --resume "$O/s.cfck" --out "$O/s.cfck" --epochs 3 --no-log
refused "--resume with --batch 4" "global batch of 2" $R9 --resume "$O/s.cfck" --out "$O/s.cfck" --epochs 3 --batch 4
accepted "--resume --lr 0.001 --override" $R9 --resume "$O/s.cfck" --out "$O/s.cfck" --epochs 3 --lr 0.001 --override
count; $B/cf-check --weights "$O/s.cfck" --info 2>&1 | grep -q "override=epoch 3: lr 0.001, was 0.003" && ok || bad "[9] --override is noted in the record"
$TR --model "$I/m.cfg" --out "$O/p.cfck" --png "$O/png" > /dev/null 2>&1
for e in 2 3 4; do accepted "--resume --out the same checkpoint with --png, to epoch $e" $R9 --resume "$O/p.cfck" --out "$O/p.cfck" --png "$O/png" --epochs $e; done
accepted "--resume (epoch 4) --epochs 2 --out another file" $R9 --resume "$O/p.cfck" --out "$O/new.cfck" --epochs 2
count; $B/cf-check --weights "$O/new.cfck" --info 2>/dev/null | grep -q "epoch 4," && ok || bad "[9] a run that trains nothing writes the checkpoint it announces"

# ---- 10. one writer per checkpoint: a second is refused at its start, naming the first
family=10
$B/cf-train --model "$I/m.cfg" --train "$I/tr" --val "$I/va" --batch 1 --epochs 300 --no-progress --out "$O/w.cfck" > /dev/null 2>&1 &
first=$!
i=0; while [ ! -e "$O/w.cfck" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
refused "a second cf-train --out the same checkpoint" "another run is writing it (pid $first" $TR --model "$I/m.cfg" --out "$O/w.cfck"
refused "a second --resume --out the same checkpoint" "another run is writing it" $R9 --resume "$O/w.cfck" --out "$O/w.cfck" --epochs 400
count; kill -0 $first 2>/dev/null && ok || bad "[10] the first writer was disturbed"
kill $first 2>/dev/null; wait $first 2>/dev/null
accepted "a new writer once the first has ended" $R9 --resume "$O/w.cfck" --out "$O/w.cfck" --epochs 400 --n-train 2 --override

# ---- 11. data sets never mixed: generators and converters refuse a directory that holds files
family=11
$B/cf-synth climate --out "$I/cds" --samples 2 --height 32 --width 48 --seed 1 > /dev/null 2>&1
refused "cf-synth climate --out a directory that holds a data set" "already holds files" $B/cf-synth climate --out "$I/cds" --samples 2 --height 32 --width 48 --seed 2
refused "cf-synth cosmo --out a directory that holds samples" "already holds files" $B/cf-synth cosmo --out "$I/tr" --samples 2 --size 16 --seed 7
refused "cf-synth cosmo --append over same-named samples" "exists: --append" $B/cf-synth cosmo --out "$I/tr" --samples 2 --size 16 --seed 1 --append
$B/cf-synth cosmo --out "$O/ap" --samples 2 --size 16 --seed 1 > /dev/null 2>&1
accepted "cf-synth cosmo --append with another seed" $B/cf-synth cosmo --out "$O/ap" --samples 2 --size 16 --seed 2 --append
count; [ "$(ls "$O/ap" | wc -l)" = 4 ] && ok || bad "[11] --append added 2 samples to 2: $(ls "$O/ap" | wc -l) files"
refused "cf-convert tfrecord2npy into the directory of its records" "holds the input" $B/cf-convert tfrecord2npy "$I"/tr/*.tfrecord --out "$I/tr"
mkdir -p "$I/mix" && cp "$sample" "$I/mix/" && $B/cf-convert tfrecord2npy "$sample" --out "$O/mixnpy" > /dev/null 2>&1 && cp "$O"/mixnpy/*_data.npy "$O"/mixnpy/*_label.npy "$I/mix/"
refused "a training directory holding a sample twice (record and its conversion)" "holds the sample .* twice" $TR --model "$I/m.cfg" --train "$I/mix" --out "$O/a.cfck"

# ---- 12. converters check what they write: no NaN label, no count that is not a count
family=12
if $PY -c 'import h5py' 2>/dev/null && ldd $B/cf-convert | grep -q libhdf5; then
    for case in "nan-label|unitPar.1. is nan" "float-density|whole numbers in .0, 32767" "negative|is -3: particle counts cannot be negative"; do
        kind=${case%%|*}; words=${case#*|}
        $PYH universe "$I/u-$kind.hdf5" "$kind"
        refused "cf-convert universe: $kind" "$words" $B/cf-convert universe "$I/u-$kind.hdf5" --out "$O/u-$kind"
        count; [ -z "$(ls "$O/u-$kind" 2>/dev/null)" ] && ok || bad "[12] universe $kind: records were written"
    done
else echo "skipped: cf-convert universe cases (python3-h5py or an HDF5 build missing)"; fi
$PYH tfrecord "$I/nanlab.tfrecord" 16 nan
refused "cf-convert tfrecord2npy: a record whose label is NaN" "label 0 (y) is nan" $B/cf-convert tfrecord2npy "$I/nanlab.tfrecord" --out "$O/nl"

# ---- 13. checkpoints whose CRC is right and whose contents are impossible: refused by name
family=13
for case in "opt0=nan|optimizer state holds a NaN" "best=nan|not plausible" "best=-inf|not plausible" "epoch=9223372036854775808|not plausible" "step=9223372036854775808|not plausible"; do
    edit=${case%%|*}; words=${case#*|}
    $PYH ckpt "$I/c.cfck" "$I/bad.cfck" "$edit"
    refused "--resume a checkpoint with $edit (its CRC correct)" "bad.cfck: .*$words" $TR --model "$I/m.cfg" --resume "$I/bad.cfck" --out "$O/a.cfck" --epochs 2 --target 0.5
    rm -f "$I/bad.cfck"
done

# ---- 14. every cfg number in range: no NaN, no infinity, no float overflow
family=14
for v in nan inf 1e39; do
    printf '[net]\ninput=4x16x16x16\n[conv]\nfilters=2\nsize=3\nbias_init=%s\n[flatten]\n[dense]\noutputs=4\n' "$v" > "$I/b$v.cfg"
    refused "bias_init=$v" "b$v.cfg:6: bias_init=$v" $B/cf-check --model "$I/b$v.cfg" --summary
done

# ---- 15. memory and threads: OpenBLAS's own buffers never meet a limit silently; a million
#      threads are capped
family=15
if ldd $B/cf-train | grep -q openblas; then
    for v in 150000 300000 450000; do
        refused "cf-train under ulimit -v $v" "address-space limit" sh -c "ulimit -v $v && exec $TR --model $I/m.cfg --out $O/a.cfck"
    done
    refused "cf-eval under ulimit -v 300000" "address-space limit" sh -c "ulimit -v 300000 && exec $EV --weights $I/c.cfck --data $I/va"
    refused "cf-synth under ulimit -v 300000" "address-space limit" sh -c "ulimit -v 300000 && exec $B/cf-synth cosmo --out $O/lim --samples 2 --size 16"
else echo "skipped: the address-space cases (this build has no OpenBLAS)"; fi
accepted "OMP_NUM_THREADS=1000000" env OMP_NUM_THREADS=1000000 $TR --model "$I/m.cfg" --out "$O/t.cfck"
count; grep -q "OMP_NUM_THREADS=1000000 is far more than" "$T/stderr" && ok || bad "[15] a capped thread count is said: $(head -c 300 "$T/stderr")"

# ---- 16. long paths: the reason kept whole, paths beyond the limits refused at the start;
#      inputs checked before outputs are made
family=16
deep=$O; for k in 1 2 3 4 5 6 7 8 9 10; do deep="$deep/$(printf '%0200d' $k)"; done
refused "--out under a 2,000-character missing directory: the reason kept" "$(printf '%0200d' 10) does not exist" $TR --model "$I/m.cfg" --out "$deep/a.cfck"
refused "--out longer than the path limit" "characters" $TR --model "$I/m.cfg" --out "$deep$deep$deep/a.cfck"
count; grep -q '^epoch' "$T/stdout" && bad "[16] a path beyond the limit refused only after an epoch" || ok
refused "--out with a 250-character file name" "file name of 250 characters" $TR --model "$I/m.cfg" --out "$O/$(printf '%0250d' 1)"
refused "cf-check --dump with an input that is not .npy" "not an .npy file" $B/cf-check --model "$I/m.cfg" --input "$I/m.cfg" --dump "$O/dumpdir"
count; [ ! -e "$O/dumpdir" ] && ok || bad "[16] cf-check --dump made its directory before refusing its input"
