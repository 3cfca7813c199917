#!/usr/bin/env bash
# Set everything up on a fresh machine, then run one nox session:
#   ./quickstart.sh parity   the main job: parity run over the shipped vocabularies -> reports/parity/
#   ./quickstart.sh tests    the test suite
#   ./quickstart.sh lint     ruff, mypy and actionlint (.ci/run runs it before the tests)
# Extra arguments go to the session (after nox's `--`).
# Needs only python3 (>= 3.11) with pip, and a C/C++ toolchain for the one-time llama-cpp-python build.
set -euo pipefail
cd "$(dirname "$0")"

session="${1:-}"
if [ -z "$session" ] || [ "$session" = "-h" ] || [ "$session" = "--help" ]; then
    sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
shift

py="${PYTHON:-python3}"
venv=".venv/quickstart"
if [ ! -x "$venv/bin/nox" ]; then
    echo "quickstart: creating $venv with nox ..."
    if ! "$py" -m venv "$venv" >/dev/null 2>&1; then
        # e.g. Debian without python3-venv: use virtualenv, installed for this user only
        rm -rf "$venv"
        PIP_BREAK_SYSTEM_PACKAGES=1 "$py" -m pip install --user --quiet virtualenv
        "$py" -m virtualenv --quiet "$venv"
    fi
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet "nox>=2024.3"
fi
exec "$venv/bin/nox" --session "$session" -- "$@"
