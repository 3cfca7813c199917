#!/usr/bin/env bash
# Set everything up on a fresh machine, then run one nox session:
#   ./quickstart.sh parity       the main job: parity run over the shipped vocabularies -> reports/parity/
#   ./quickstart.sh tests        the test suite
#   ./quickstart.sh lint         ruff, mypy and actionlint (.ci/run runs it before the tests)
# Extra arguments go to the session (after nox's `--`). Or use the ready environment (.nox/env: this
# checkout installed with [harness], llama.cpp, the shipped vocabularies, the chat helper):
#   ./quickstart.sh shell        a shell in it, where the README's commands run as printed (exit to leave)
#   ./quickstart.sh exec CMD...  one command in it, e.g. ./quickstart.sh exec python -m harness fetch
# (or `source .nox/env/bin/activate` in any shell, once one of those two has set it up).
# Needs only python3 (>= 3.11) with pip, and a C/C++ toolchain for the one-time llama-cpp-python build.
set -euo pipefail
cd "$(dirname "$0")"

session="${1:-}"
if [ -z "$session" ] || [ "$session" = "-h" ] || [ "$session" = "--help" ]; then
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
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

# The ready environment: nox's `env` session sets it up (cached: again only when pyproject.toml, the pin or an
# extra's requirements changed: harness/data/pin.txt, harness/data/extras/).
env_dir="$PWD/.nox/env"
ready_env() {
    local want stamp="$env_dir/.quickstart-ready"
    want="$(cat pyproject.toml harness/data/pin.txt harness/data/extras/*.txt 2>/dev/null | cksum)"
    if [ ! -x "$env_dir/bin/python" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "quickstart: setting up $env_dir (nox -s env) ..." >&2
        "$venv/bin/nox" --session env >&2
        printf '%s\n' "$want" > "$stamp"
    fi
    export VIRTUAL_ENV="$env_dir" PATH="$env_dir/bin:$PATH"
    unset PYTHONHOME
}

case "$session" in
    shell)
        ready_env
        echo "quickstart: a shell in $env_dir: python -m harness ..., pytest --parity-model ...; exit to leave" >&2
        shell="${SHELL:-/bin/bash}"
        if [ "$(basename "$shell")" = "bash" ]; then  # bash's prompt shows the environment, as after activate
            rc="$env_dir/quickstart.bashrc"
            printf '%s\n' '[ -f ~/.bashrc ] && . ~/.bashrc' ". '$env_dir/bin/activate'" > "$rc"
            exec "$shell" --rcfile "$rc" "$@"
        fi
        exec "$shell" "$@"
        ;;
    exec)
        if [ $# -eq 0 ]; then
            echo "quickstart: exec needs a command, e.g. ./quickstart.sh exec python -m harness --help" >&2
            exit 2
        fi
        ready_env
        exec "$@"
        ;;
esac
exec "$venv/bin/nox" --session "$session" -- "$@"
