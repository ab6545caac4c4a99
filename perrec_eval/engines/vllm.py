"""Offline vLLM: one `LLM.chat` call per `generate`, with every sampling parameter set explicitly.

The model's ``generation_config.json`` is not loaded (``generation_config="vllm"``), so its defaults cannot
leak into a run; the sampling fields outside `GenParams` are pinned to neutral values. vLLM is an optional
extra (``pip install "perrecbench[vllm]"``) and is imported only when the engine is built.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from perrec_eval.engines._common import ResultsCallback, require
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)


class VLLMEngine:
    """A vLLM `LLM`, optionally with one LoRA adapter applied to every request.

    Args:
        model: Hub id or local folder of a chat model.
        adapter: folder of a PEFT LoRA adapter, or None.
        seed: engine seed (per-request seeds come from `GenParams.seed`).
        max_lora_rank: the largest adapter rank vLLM must support (the paper's adapters use 16).
        progress: show vLLM's progress bar.
        **llm_options: passed to ``vllm.LLM`` (e.g. ``tensor_parallel_size``, ``max_model_len``,
            ``gpu_memory_utilization``, ``dtype``).
    """

    name = "vllm"
    supports_on_results = False

    def __init__(
        self,
        model: str,
        *,
        adapter: str | None = None,
        seed: int = 0,
        max_lora_rank: int = 16,
        progress: bool = True,
        **llm_options: Any,
    ) -> None:
        self._vllm = require("vllm", engine="vllm")
        self.model = model
        self.adapter = adapter
        self.progress = progress
        self.llm_options = dict(llm_options)
        options: dict[str, Any] = {"seed": seed, "generation_config": "vllm", **self.llm_options}
        if adapter is not None:
            options.update(enable_lora=True, max_lora_rank=max_lora_rank)
        self.llm = self._vllm.LLM(model=model, **options)
        self._lora_request = None
        if adapter is not None:
            lora = require("vllm.lora.request", engine="vllm")
            self._lora_request = lora.LoRARequest("perrec-adapter", 1, adapter)

    def sampling_params(self, params: GenParams) -> Any:
        """The `vllm.SamplingParams` for `params` (temperature 0 is greedy in vLLM)."""
        return self._vllm.SamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=0,
            min_p=0.0,
            repetition_penalty=1.0,
            presence_penalty=0.0,
            frequency_penalty=0.0,
            max_tokens=params.max_tokens,
            seed=params.seed,
        )

    def generate(
        self,
        requests: Sequence[ChatRequest],
        params: GenParams,
        *,
        on_results: ResultsCallback | None = None,
    ) -> list[Completion]:
        """Complete every request in one `LLM.chat` call; vLLM returns outputs in input order."""
        conversations = [[dict(message) for message in request.messages] for request in requests]
        outputs = self.llm.chat(
            conversations,
            sampling_params=self.sampling_params(params),
            use_tqdm=self.progress,
            lora_request=self._lora_request,
            add_generation_prompt=True,
        )
        if len(outputs) != len(requests):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(requests)} requests")
        completions = [self._completion(output) for output in outputs]
        if on_results is not None:
            on_results(list(enumerate(completions)))
        return completions

    @staticmethod
    def _completion(output: Any) -> Completion:
        samples = list(output.outputs)
        return Completion(
            texts=tuple(sample.text for sample in samples),
            prompt_tokens=len(output.prompt_token_ids) if output.prompt_token_ids is not None else None,
            completion_tokens=sum(len(sample.token_ids) for sample in samples),
            extra={"finish_reasons": [sample.finish_reason for sample in samples]},
        )

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model,
            "adapter": self.adapter,
            "vllm_version": self._vllm.__version__,
            "llm_options": {key: repr(value) for key, value in self.llm_options.items()},
        }
