#!/usr/bin/env bash
# One prepared run on a 16-core machine: thread scaling of the batch kernels at 1/2/4/8/16
# threads, then the rerank CLI on a Q-query synthetic pool file (M=200, default 100k) at each
# thread count in RERANK_THREADS (default 16) with peak RSS.  Writes everything under ${OUT:-/tmp/scaling_out}.
# Example (SGR + JKO kernel scaling, CLI at 8 and 16 threads on 20k queries):
#   SCALING_ARGS="--only sgr_top10,bm25s_top10,jko_implicit" Q=20000 RERANK_THREADS="8 16" bash scripts/device_scaling.sh
set -u
OUT=${OUT:-/tmp/scaling_out}; mkdir -p "$OUT"
export NUMBA_NUM_THREADS=${NUMBA_NUM_THREADS:-16} PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
Q=${Q:-100000}
export OUT
{
  date; nproc; lscpu | grep -E 'Model name|^CPU\(s\)' ; free -g | head -2
  python3 -c "import numba, numpy, scipy, sklearn; print('numba', numba.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__)"
} 2>&1 | tee "$OUT/machine.txt"
timeout ${SCALING_TIMEOUT:-330} python3 benchmarks/tools/thread_scaling.py --out "$OUT/scaling.json" ${SCALING_ARGS:-} 2>&1 | tee "$OUT/scaling.log"
t0=$(date +%s)
python3 benchmarks/tools/make_synthetic_pools.py /tmp/syn_device --queries "$Q" --pool 200 2>&1 | tail -2
echo "generated $Q queries in $(( $(date +%s) - t0 )) s; $(wc -l < /tmp/syn_device/run.trec) lines" | tee "$OUT/rerank100k.log"
for NT in ${RERANK_THREADS:-16}; do
rm -rf /tmp/syn_device/out.trec /tmp/syn_device/out.trec.parts
NT=$NT timeout ${RERANK_TIMEOUT:-240} python3 - "$Q" <<'PY' 2>&1 | tee -a "$OUT/rerank100k.log"
import json, os, resource, subprocess, sys, time
q = sys.argv[1]
cmd = [sys.executable, "-m", "jkofast", "rerank", "--pools", "/tmp/syn_device/run.trec", "--embeddings", "/tmp/syn_device/E.npy",
       "--ids", "/tmp/syn_device/ids.txt", "--config", "tuned", "--grad", "implicit", "--chunk-size", "2000",
       "--threads", os.environ["NT"], "--out", "/tmp/syn_device/out.trec", "--json"]
print(" ".join(cmd), flush=True)
t = time.perf_counter()
with open(os.path.join(os.environ["OUT"], f"rerank_stderr_{os.environ['NT']}t.log"), "w") as err:
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
wall = time.perf_counter() - t
print(r.stdout[-3000:])
print(json.dumps({"queries": int(q), "threads": int(os.environ["NT"]), "wall_s": wall, "rc": r.returncode,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
PY
done
ls -la /tmp/syn_device
