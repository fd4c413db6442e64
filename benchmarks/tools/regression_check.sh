#!/usr/bin/env bash
# Performance regression check between two commits with asv (see docs/performance.md).
#
#   benchmarks/tools/regression_check.sh [--full] [--factor F] [--all] BASE HEAD [BENCH_REGEX]
#
# Builds BASE and HEAD into asv's own virtualenv (asv.conf.json), runs the CURRENT suites of
# benchmarks/ against both (`asv continuous --factor F --split`), prints asv's table and exits
# non-zero when a benchmark got slower by more than F (default 1.1) or started failing.
#
#   --full      regular profile (full sizes, asv's own repeats); default: the fast profile
#               (JKOFAST_BENCH_PROFILE=fast, small sizes) with `asv continuous --quick`
#   --factor F  ratio HEAD/BASE above which a result counts as a regression (default 1.1)
#   --all       list every benchmark in the table, not only the changed ones
#
# Exit status: 0 no regression; 1 regression (slower by more than F, or broke at HEAD);
# 2 usage error or asv failed; 3 no regression, but some benchmark failed at either commit.
set -euo pipefail

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }

full=0
factor=1.1
only_changed=--only-changed
while [ $# -gt 0 ]; do
    case "$1" in
        --full) full=1; shift ;;
        --factor) factor=${2:?--factor needs a value}; shift 2 ;;
        --all) only_changed=--no-only-changed; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; break ;;
        -*) echo "regression_check.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    usage >&2
    exit 2
fi
base=$1
head=$2
regex=${3:-}

cd "$(dirname "$0")/../.."
command -v asv >/dev/null || { echo "regression_check.sh: asv not found (pip install -e '.[bench]')" >&2; exit 2; }
git rev-parse --verify -q "$base^{commit}" >/dev/null || { echo "regression_check.sh: unknown commit $base" >&2; exit 2; }
git rev-parse --verify -q "$head^{commit}" >/dev/null || { echo "regression_check.sh: unknown commit $head" >&2; exit 2; }

# asv needs this machine described once (~/.asv-machine.json); record the defaults if it is not.
if ! grep -qs "\"$(hostname)\"" "$HOME/.asv-machine.json"; then
    asv machine --yes >/dev/null
fi

args=(continuous --factor "$factor" --split "$only_changed" --show-stderr)
if [ "$full" = 1 ]; then
    profile=regular
else
    profile=fast
    args+=(--quick)
fi
if [ -n "$regex" ]; then
    args+=(--bench "$regex")
fi
args+=("$base" "$head")

echo "regression_check: JKOFAST_BENCH_PROFILE=$profile asv ${args[*]}"
regression() {
    echo "regression_check: REGRESSION above factor $factor ($base -> $head): rows marked + (slower) or ! (broke)" >&2
    if [ "$full" = 0 ]; then
        echo "regression_check: one --quick sample per side; confirm a + row with --full before believing it" >&2
    fi
    exit 1
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
JKOFAST_BENCH_PROFILE=$profile asv "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
case "$rc" in
    0)
        echo "regression_check: no regression above factor $factor ($base -> $head)"
        exit 0
        ;;
    1)
        if grep -q "PERFORMANCE DECREASED" "$log"; then
            regression
        fi
        echo "regression_check: asv failed (see above)" >&2
        exit 2
        ;;
    2)
        # A benchmark failed at one of the commits: asv continuous then prints no table.  The
        # results it did record are compared here with the same factor.
        echo "regression_check: some benchmarks failed (stderr above); comparison of the recorded results:" >&2
        asv compare --factor "$factor" --split "$only_changed" "$base" "$head" | tee "$log"
        if grep -Eq '^\| *[+!] ' "$log"; then
            regression
        fi
        echo "regression_check: no regression above factor $factor, but benchmarks failed ($base -> $head)" >&2
        exit 3
        ;;
    *)
        exit "$rc"
        ;;
esac
