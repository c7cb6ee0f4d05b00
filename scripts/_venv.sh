# Sourced by scripts/test and scripts/demo: create or reuse .venv and install thrum.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-python3}"
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "thrum needs Python 3.11 or newer (found: $("$py" --version 2>&1))" >&2
  exit 1
fi
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
stamp="$venv/.thrum-installed"
extras="${THRUM_EXTRAS:-test}"
# thrum is installed editable as a plain path in a .pth file (setuptools' "compat" mode):
# the default mode's import hook is imported by every Python process of the venv, ~5 ms of
# CPU each (a suite starts ~2,700: daemons, CLIs, gc-mail). The repository's root on
# sys.path also makes `fixtures` importable, as pytest's `pythonpath` does for the tests.
mode="$extras editable=compat"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$mode" ]; then
  log="$venv/install.log"
  echo "thrum: installing into $venv (log: $log)" >&2
  if ! "$venv/bin/python" -m pip install --upgrade -e "$root[$extras]" --config-settings editable_mode=compat >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "thrum: installation failed; see $log" >&2
    exit 1
  fi
  echo "$mode" > "$stamp"
fi
export PATH="$venv/bin:$PATH"
# Python caches compiled modules (__pycache__, ignored by git). A suite starts hundreds of
# Python processes (daemons, CLIs, workers): without the caches each compiles thrum from
# source again, a third of a daemon's start-up CPU (0.50 -> 0.34 s), so an inherited
# PYTHONDONTWRITEBYTECODE is dropped here.
unset PYTHONDONTWRITEBYTECODE
