#!/usr/bin/env bash
# One prepared run on a 16-core machine: thread scaling of the batch kernels at 1/2/4/8/16
# threads, then the rerank CLI on a 100k-query synthetic pool file (M=200) at 16 threads
# with peak RSS.  Writes everything under ${OUT:-/tmp/scaling_out}.
set -u
OUT=${OUT:-/tmp/scaling_out}; mkdir -p "$OUT"
export NUMBA_NUM_THREADS=${NUMBA_NUM_THREADS:-16} PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
Q=${Q:-100000}
export OUT
{
  date; nproc; lscpu | grep -E 'Model name|^CPU\(s\)' ; free -g | head -2
  python3 -c "import numba, numpy, scipy, sklearn; print('numba', numba.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__)"
} 2>&1 | tee "$OUT/machine.txt"
timeout ${SCALING_TIMEOUT:-330} python3 scripts/thread_scaling.py --out "$OUT/scaling.json" ${SCALING_ARGS:-} 2>&1 | tee "$OUT/scaling.log"
t0=$(date +%s)
python3 scripts/make_synthetic_pools.py /tmp/syn --queries "$Q" --pool 200 2>&1 | tail -2
echo "generated $Q queries in $(( $(date +%s) - t0 )) s; $(wc -l < /tmp/syn/run.trec) lines" | tee "$OUT/rerank100k.log"
timeout ${RERANK_TIMEOUT:-240} python3 - "$Q" <<'PY' 2>&1 | tee -a "$OUT/rerank100k.log"
import json, os, resource, subprocess, sys, time
q = sys.argv[1]
cmd = [sys.executable, "-m", "jkofast", "rerank", "--pools", "/tmp/syn/run.trec", "--embeddings", "/tmp/syn/E.npy",
       "--ids", "/tmp/syn/ids.txt", "--config", "tuned", "--grad", "implicit", "--chunk-size", "2000",
       "--threads", os.environ.get("NUMBA_NUM_THREADS", "16"), "--out", "/tmp/syn/out.trec", "--json"]
print(" ".join(cmd), flush=True)
t = time.perf_counter()
with open(os.path.join(os.environ["OUT"], "rerank_stderr.log"), "w") as err:
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
wall = time.perf_counter() - t
print(r.stdout[-3000:])
print(json.dumps({"queries": int(q), "wall_s": wall, "rc": r.returncode,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
PY
ls -la /tmp/syn
