#!/usr/bin/env bash
# Download the wheels kernel-ledger needs on the GPU machine (Python 3.12, x86-64, no network
# there) into .whl/ at the repository root. The machine already has numpy, rich, pygments,
# markdown-it-py, shellingham, typing-extensions and MarkupSafe; the rest travels as wheels.
# Versions are the ones this repository's .venv resolves to.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
mkdir -p .whl
plat=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
    manylinux1_x86_64; do
    plat+=(--platform "$p")
done
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${plat[@]}" -d .whl \
    pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
    SQLAlchemy==2.1.9 greenlet==3.5.6 alembic==1.20.1 Mako==1.4.3 \
    typer==0.28.0 click==8.5.1 rfc8785==0.1.4 orjson==3.13.0 typing-extensions==4.16.0
ls -l .whl
du -sh .whl
