# Two entry points for a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export OMP_NUM_THREADS ?= 1
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
DEMO ?= demo_out

.PHONY: demo test lint bench clean

$(VENV)/.core: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e ".[metric,report]"
	touch $@

# torch goes first and pinned: 2.13.0 is the CPU wheel; a bare `torch` pulls a multi-GB CUDA build.
$(VENV)/.full: $(VENV)/.core
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[test,hf,openai,train,report]"
	touch $@

demo: $(VENV)/.core
	$(VENV)/bin/perrecbench synth --out $(DEMO)/raw --reviews-per-domain 60000 --seed 0
	$(VENV)/bin/perrecbench build --source $(DEMO)/raw --out $(DEMO)/perrecbench --test-groups 200 --overwrite
	$(VENV)/bin/perrecbench evaluate --data $(DEMO)/perrecbench --engine baseline --model all --out $(DEMO)/runs/baselines
	$(VENV)/bin/perrecbench report $(DEMO)/runs/baselines --out $(DEMO)/report

test: $(VENV)/.full
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

lint: $(VENV)/.full
	$(VENV)/bin/ruff check .

bench: $(VENV)/.full
	$(PY) benchmarks/build_bench.py
	$(PY) benchmarks/metric_bench.py
	$(PY) benchmarks/retrieval_bench.py
	$(PY) benchmarks/eval_bench.py

clean:
	rm -rf $(DEMO)
