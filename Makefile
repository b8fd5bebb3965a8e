# kernel-ledger: every target sets up what it needs.
#   make demo   - install into .venv and replay the demo campaign on an embedded SQLite ledger
#   make test   - install, start a throwaway PostgreSQL cluster, run the whole suite
#   make faults - the long fault and abuse campaign (docs/reliability.md)
#   make docs   - write the docs derived from the commands' declarations (cli/docs.py)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint bench clean faults docs

$(STAMP): pyproject.toml
	@echo "setting up $(VENV): kernel-ledger and its extras (sqlalchemy, alembic, pydantic, numpy,"
	@echo "typer, psycopg, cryptography, matplotlib, jinja2, starlette, mcp, pytest, ruff, playwright);"
	@echo "about a minute, once; each package is listed as it is collected"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@bash -c "set -o pipefail; $(BIN)/python -m pip install --disable-pip-version-check \
		-e '.[dev,postgres,sign,report,serve,mcp]' | grep --line-buffered -E '^(Collecting|Successfully)' \
		| sed -u 's/^/  /'"
	@touch $(STAMP)
	@echo "$(VENV) is ready"

install: $(STAMP)

demo: $(STAMP)
	@bash examples/demo.sh

# torch (CPU) and triton, for the harness tests under Triton's interpreter
HARNESS := $(VENV)/.harness-installed
$(HARNESS): $(STAMP)
	@echo "installing torch (CPU build) and triton for the harness tests (about a minute, once)"
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[harness]'
	@touch $(HARNESS)

test: $(STAMP) $(HARNESS)
	@bash tools/run-tests

lint: $(STAMP)
	@$(BIN)/ruff check .
	@$(BIN)/ruff format --check .

docs: $(STAMP)
	@$(BIN)/python -m cli.docs

bench: $(STAMP)
	@$(BIN)/python benchmarks/run.py

# The long fault and abuse campaign (docs/reliability.md); figures go to FAULTS_REPORT.
FAULTS_REPORT ?= .vaws-local/faults/figures.jsonl
faults: $(STAMP)
	@rm -f $(FAULTS_REPORT)
	@KERNEL_LEDGER_FAULTS=long KERNEL_LEDGER_FAULTS_REPORT=$(FAULTS_REPORT) bash tools/run-tests tests/faults
	@$(BIN)/python tests/faults/faultkit.py summarize $(FAULTS_REPORT)

clean:
	rm -rf .demo .pgtest .pytest_cache .ruff_cache
