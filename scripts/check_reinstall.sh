#!/usr/bin/env bash
# The README's two commands in one environment: `pip install --no-compile .`, a run (kernels compiled and
# cached), then `pip install -e .` -- jkofast must still import and run, no Numba cache file
# may be left inside the installed package (it would shadow the editable install as a namespace
# package), and the editable install must load the kernels the first one compiled (no new cache
# file). Uses a throw-away venv that sees the packages of the interpreter running this script
# (numpy, numba, ... are not reinstalled) and a throw-away cache root.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
unset NUMBA_CACHE_DIR JKOFAST_CACHE_DIR
export XDG_CACHE_HOME="$work/cache"
# The venv is made from the active interpreter (a venv's python3 included) and sees that
# interpreter's site-packages through a .pth of plain paths: --system-site-packages would show
# the *base* interpreter's packages instead, which lack numba when the active one is a venv.
# Plain path lines add the folders without running their .pth hooks, so an editable jkofast
# installed there stays invisible and the probe imports the copy installed below.
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
python3 -c 'import site, sys, sysconfig
dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
if site.ENABLE_USER_SITE: dirs.append(site.getusersitepackages())
print("\n".join(dict.fromkeys(d for d in dirs if d)))' >"$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_parent_env.pth"
# a copy of the tree: `pip install .` must not write build/ or *.egg-info into the checkout
git ls-files -z | tar --null -cf - -T - | (mkdir -p "$work/src" && tar -xf - -C "$work/src")
probe='import numpy as np, jkofast; from jkofast.jko.energy import minmax
assert jkofast.__version__, "no __version__"
print("jkofast", jkofast.__version__, "from", jkofast.__file__, minmax(np.array([1.0, 3.0])))'
"$py" -m pip install -q --no-compile --no-deps "$work/src"
(cd "$work" && "$py" -c "$probe" | tee "$work/probe1")
grep -q "from $work/venv/" "$work/probe1" || { echo "FAIL: the installed copy was not the one imported" >&2; exit 1; }
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if find "$site/jkofast" -name '*.nbi' | grep -q .; then
  echo "FAIL: Numba cache files inside the installed package" >&2
  exit 1
fi
files1="$(find "$XDG_CACHE_HOME" -name '*.nb[ic]' | wc -l)"
"$py" -m pip install -q --no-deps -e "$work/src"
if [ -d "$site/jkofast" ]; then
  echo "FAIL: $site/jkofast left behind after the editable install" >&2
  exit 1
fi
(cd "$work" && "$py" -c "$probe" | tee "$work/probe2")
grep -q "from $work/src/" "$work/probe2" || { echo "FAIL: the editable install was not the one imported" >&2; exit 1; }
# the cache is keyed by the kernel sources' content, not the install path: the second install compiles nothing
files2="$(find "$XDG_CACHE_HOME" -name '*.nb[ic]' | wc -l)"
[ "$files1" -gt 0 ] && [ "$files2" -eq "$files1" ] || {
  echo "FAIL: the editable install compiled its kernels again ($files1 cache files after the first install, $files2 after)" >&2
  exit 1
}
echo "reinstall check: ok"
