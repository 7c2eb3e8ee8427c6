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
$(BIN)/layerswap: pyproject.toml requirements.lock requirements-test.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock $(TORCH)
	$(BIN)/pip install --quiet -c requirements.lock -c requirements-test.lock -e '.[test,cluster]'
	touch $@

# The pinned uv, in a venv of its own (locks and the GPU venv).
LOCK_UV := .lock-venv/bin/uv
$(LOCK_UV):
	$(PYTHON) -m venv .lock-venv && .lock-venv/bin/pip install --quiet $(UV)

# Re-pin every dependency (after an edit of pyproject.toml's ranges); uv keeps a lock's pins that still fit and
# builds the few sdists (pure Python) with the Python it finds, whatever the target version.
#   requirements.lock       what the workflow runs (+ the SLURM plugin): universal, Python >= 3.11
#   requirements-test.lock  the test-only packages, resolved under requirements.lock's pins (it never moves one)
#   requirements-gpu.lock   + vLLM (`make lock-gpu`)
lock: | $(LOCK_UV)
	echo "$(TORCH)" | $(LOCK_UV) pip compile --no-python-downloads pyproject.toml - --extra cluster --universal \
		--python-version 3.11 --custom-compile-command "make lock" -o requirements.lock
	echo "$(UV)" | $(LOCK_UV) pip compile --no-python-downloads pyproject.toml - --extra test -c requirements.lock \
		--universal --python-version 3.11 --custom-compile-command "make lock" -o requirements-test.lock
	$(MAKE) lock-gpu

# GPU nodes: the workflow + SLURM plugin + vLLM, under requirements.lock's pins except GPU_OWN_PINS, which vLLM's
# dependencies cap below them: numpy (numba wants < 2.5, mistral-common < 2.4 on Python < 3.13; with the SLURM
# plugin's >= 2.4.5 only Python >= 3.13 resolves), setuptools (vLLM < 81), cuda-bindings (cuda-python pins it to
# its own release). `make lock-gpu GPU_PYTHON=3.12` shows uv's reason for a version that does not resolve.
GPU_PYTHON ?= 3.13
GPU_OWN_PINS := numpy setuptools cuda-bindings
lock-gpu: | $(LOCK_UV)
	grep -v -E '^($(shell echo $(GPU_OWN_PINS) | tr ' ' '|'))==' requirements.lock > .lock-venv/gpu-constraints.txt
	$(LOCK_UV) pip compile --no-python-downloads pyproject.toml --extra cluster --extra vllm \
		-c .lock-venv/gpu-constraints.txt --universal --python-version $(GPU_PYTHON) \
		--custom-compile-command "make lock-gpu" -o requirements-gpu.lock

# The GPU nodes' venv (both backends, hf and vllm; also runs Snakemake on the login node), every package at the
# version requirements-gpu.lock pins (CUDA wheels). GPU_VENV_PYTHON: a version uv finds on PATH (or downloads a
# build of), or an interpreter's path; 3.13 or 3.14.
GPU_VENV := .venv-gpu
GPU_VENV_PYTHON ?= $(GPU_PYTHON)
gpu-venv: $(GPU_VENV)/bin/layerswap
$(GPU_VENV)/bin/layerswap: pyproject.toml requirements-gpu.lock | $(LOCK_UV)
	$(LOCK_UV) venv --clear --python $(GPU_VENV_PYTHON) $(GPU_VENV)
	$(LOCK_UV) pip install --python $(GPU_VENV)/bin/python -c requirements-gpu.lock -e '.[cluster,vllm]'
	touch $@

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

.PHONY: run test report clean lock lock-gpu gpu-venv slurm-deps
run: $(BIN)/layerswap
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --cores $(CORES)

report: $(BIN)/layerswap
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --cores $(CORES) --report results/report.html

test: $(BIN)/layerswap slurm-deps
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -q

clean:
	rm -rf results .snakemake
