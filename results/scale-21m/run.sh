#!/bin/bash
set -e
cd /tmp/snap21
export PYTHONPATH=/tmp/snap21
PY=/work/main/.venv/bin/python
W=/tmp/scale21
N=21000000
date -u +"start %FT%T" 
if [ ! -f $W/synth-$N.jsonl ]; then
  /usr/bin/time -v $PY -c "
import time,sys
from searchgym.retrieval.synth import write_synthetic_corpus
t=time.perf_counter(); write_synthetic_corpus('$W/synth-$N.jsonl', $N, vocab_size=2_000_000)
print('corpus_s', time.perf_counter()-t, file=sys.stderr)" 2> $W/gen.time
fi
date -u +"corpus done %FT%T"
$PY scripts/bench_scale.py --phase build --corpus $W/synth-$N.jsonl --index $W/index-$N --shard-size 1000000 --queries 2000 --single 300 --vocab-size 2000000 --parity-queries 200 > $W/build.out 2> $W/build.err
tail -1 $W/build.out > $W/build-$N.json
date -u +"build done %FT%T"
