#!/usr/bin/env bash
# The project's Python in .venv (git-ignored): the packages of requirements.txt, pinned.
# Every script runs Python as .venv/bin/python. Does nothing when .venv already holds
# exactly this requirements.txt. PYTHON names the interpreter that makes the venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
stamp=.venv/requirements.installed
if [ -x .venv/bin/python ] && cmp -s requirements.txt "$stamp"; then exit 0; fi
echo "python: making .venv with $($PYTHON --version 2>&1) from requirements.txt"
[ -x .venv/bin/python ] || $PYTHON -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
cp requirements.txt "$stamp"
