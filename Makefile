# Two commands do all set-up on a fresh machine:
#   make run    builds .venv if missing, then runs the whole workflow on the embedded toy-world default
#   make test   builds .venv if missing, then runs the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORES ?= 2

TORCH := torch==2.13.0
UV := uv==0.13.8

# Every package at the version requirements.lock pins (pip constraints: only what this package needs is installed).
# torch first: where a CPU build of the pinned version is on offer (a CPU-only machine) pip takes it, and its
# metadata asks for no CUDA wheels; on a GPU node it is the PyPI build with the CUDA wheels the lock pins.
$(BIN)/layerswap: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock $(TORCH)
	$(BIN)/pip install --quiet -c requirements.lock -e '.[test,cluster]'
	touch $@

# Re-pin every dependency (after an edit of pyproject.toml's ranges): one universal lock for Python >= 3.11.
lock:
	$(PYTHON) -m venv .lock-venv && .lock-venv/bin/pip install --quiet $(UV)
	echo "$(TORCH)" | .lock-venv/bin/uv pip compile pyproject.toml - --extra test --extra cluster --universal \
		--python-version 3.11 --custom-compile-command "make lock" -o requirements.lock
	rm -rf .lock-venv

# Debian's SLURM, for tests/test_slurm.py (a one-node cluster on loopback that the tests start and stop as root):
# installed where root can apt-get; elsewhere those tests are skipped (unless LAYERSWAP_REQUIRE_SLURM=1, as in CI).
SLURM_PKGS := slurm-wlm slurmdbd munge mariadb-server
slurm-deps:
	@if $(PYTHON) tests/slurm_cluster.py --installed; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing $(SLURM_PKGS) (Debian) for the SLURM tests"; \
		apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SLURM_PKGS) >/dev/null; \
	else echo "slurm-deps: no SLURM and no root apt-get here: tests/test_slurm.py will be skipped"; fi

.PHONY: run test report clean lock slurm-deps
run: $(BIN)/layerswap
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --cores $(CORES)

report: $(BIN)/layerswap
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --cores $(CORES) --report results/report.html

test: $(BIN)/layerswap slurm-deps
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -q

clean:
	rm -rf results .snakemake
