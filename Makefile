# Two commands do all set-up on a fresh machine:
#   make run    builds .venv if missing, then runs the whole workflow on the embedded toy-world default
#   make test   builds .venv if missing, then runs the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORES ?= 2

$(BIN)/layerswap: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned: on CPU-only machines this takes the CPU wheel; the ranges below then install nothing more.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test,cluster]'
	touch $@

.PHONY: run test report clean
run: $(BIN)/layerswap
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --cores $(CORES)

report: $(BIN)/layerswap
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --cores $(CORES) --report results/report.html

test: $(BIN)/layerswap
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -q

clean:
	rm -rf results .snakemake
