"""Local generation with transformers: chat template, left-padded length-sorted batches, CPU or GPU.

Sampling is fully explicit: the model's own `generation_config.json` (which may enable sampling, set top_k,
a repetition penalty, ...) is replaced at load time by one that keeps only the special token ids, and each
call passes a complete `GenerationConfig`. The dropped defaults are listed in `info()`.

Sampled answers do not depend on the batch. transformers' own sampling draws every row of a batch from one
global random stream (`torch.multinomial`), and `generate` takes no per-row generator, so a request's sample
would change with the requests batched beside it, their order, and what a resumed run still has to ask.
Instead each of a request's `n` samples is one row with its own `torch.Generator`, seeded from
(``GenParams.seed``, sample index, messages) by `_common.sample_seed`; the temperature and top-p warpers
and a Gumbel-max draw with that generator (`SeededSampler`) run as logits processors of a greedy search,
whose argmax then picks exactly the drawn token. Greedy requests (temperature 0) stay one row each.

A GGUF file (``--model path/to/model.gguf``) is loaded with transformers' GGUF support (the ``gguf``
package): its weights are dequantized to float32 and its tokenizer and chat template come from the file.

Structured outputs (`GenParams.answer_format`) go through outlines (the ``[structured]`` extra): its
outlines-core index of the answer's regular expression masks every token that would leave the format,
before the sampling processors. outlines rather than xgrammar (which pulls triton into a CPU install) or
lm-format-enforcer (whose transformers integration does not import under transformers 5); vLLM can use
outlines as its structured-output backend too.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import logging
import secrets
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from perrec_eval import progress
from perrec_eval.cliconfig import option
from perrec_eval.engines._common import (
    check_local_path,
    coerce_fields,
    converted_from,
    sample_seed,
)
from perrec_eval.engines.base import ResultsCallback
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.extras import require
from perrec_eval.types import ChatRequest, Completion, GenParams

logger = logging.getLogger(__name__)
_ENGINE = "the 'hf' engine"  # named when an extra is missing

_TOKEN_ID_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


def gguf_location(model: str) -> tuple[str, dict[str, str]]:
    """Where `from_pretrained` finds `model`: a ``.gguf`` file is its folder plus ``gguf_file=``.

    >>> gguf_location("/models/smol.Q4_1.gguf")
    ('/models', {'gguf_file': 'smol.Q4_1.gguf'})
    >>> gguf_location("Qwen/Qwen2.5-0.5B-Instruct")
    ('Qwen/Qwen2.5-0.5B-Instruct', {})
    """
    if not model.endswith(".gguf"):
        return model, {}
    path = Path(model)
    return str(path.parent), {"gguf_file": path.name}


@dataclass(frozen=True, slots=True)
class HFOptions:
    """Options of the transformers engine (``--engine-arg KEY=VALUE``)."""

    batch_size: int = option("requests per forward batch (each yields n sequences)", default=8)
    max_batch_tokens: int = option(
        "prompt tokens one forward batch may hold (its rows × its longest prompt, padding included): bounds "
        "the prefill's memory, about 0.1 GB per 1,000 tokens for a 135M model; a longer prompt goes alone",
        default=4096,
    )
    device: str | None = option(
        '"cpu", "cuda", "cuda:1", ...; none: CUDA if available, else CPU', default=None
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = option(
        "weights dtype; auto keeps the checkpoint's", default="auto"
    )
    merge_adapter: bool = option(
        "merge the LoRA adapter into the weights after loading (faster)", default=False
    )
    trust_remote_code: bool = option("run the model repository's own code (from_pretrained)", default=False)

    def __post_init__(self) -> None:
        coerce_fields(self)
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1 (requests per forward batch), got {self.batch_size}")
        if self.max_batch_tokens < 1:
            raise ConfigError(
                f"max_batch_tokens must be >= 1 (prompt tokens per forward batch), got "
                f"{self.max_batch_tokens}"
            )
        if self.device is not None and not self.device.strip():
            raise ConfigError("device must name a torch device (cpu, cuda, cuda:1, ...) or be none (auto)")

    def answer_options(self) -> dict[str, Any]:
        """The options that change answers, when not at their defaults (see `engines.base.answer_options`).

        >>> HFOptions().answer_options(), HFOptions(dtype="float16", merge_adapter=True).answer_options()
        ({}, {'dtype': 'float16', 'merge_adapter': True})
        """
        found: dict[str, Any] = {}
        if self.dtype != "auto":
            found["dtype"] = self.dtype
        if self.merge_adapter:  # merged weights round differently from adapter layers
            found["merge_adapter"] = True
        return found


@contextlib.contextmanager
def _loading(where: str, flag: str = "--model") -> Iterator[None]:
    """`from_pretrained` failing on what the user named becomes one line naming `where` and the fix."""
    from safetensors import SafetensorError

    try:
        yield
    except SafetensorError as err:
        raise DataError(
            f"cannot read the weights in {where} ({' '.join(str(err).split())[:200]}): a weights file is cut "
            "or damaged; download or save the model again"
        ) from err
    except (OSError, ValueError) as err:  # transformers' and peft's "cannot find or load this" errors
        raise ConfigError(
            f"{flag} {where} cannot be loaded ({' '.join(str(err).split())[:300]}): pass a folder or Hub id "
            "that transformers can load"
        ) from err


def convert_gguf(path: str, out: str) -> str:
    """Write a GGUF file as a transformers model folder (float32 weights, tokenizer, chat template).

    transformers dequantizes the file on loading but refuses to save a model it still marks as GGUF
    quantized; the marks are removed first (the weights are already plain tensors). The folder then loads
    in any engine, vLLM included.

    Returns:
        `out`.
    """
    transformers = require("transformers", "hf", by=_ENGINE)
    require("gguf", "hf", by=_ENGINE)
    location, gguf = gguf_location(path)
    if not gguf or not Path(path).is_file():
        raise ConfigError(f"{path} is not a .gguf file")
    try:
        with _loading(path, "convert-gguf"):
            tokenizer = transformers.AutoTokenizer.from_pretrained(location, **gguf)
            lm = transformers.AutoModelForCausalLM.from_pretrained(location, **gguf)
    except (struct.error, EOFError) as err:  # the gguf reader unpacks past the end of a cut file
        raise DataError(
            f"{path} is cut short ({err}): not a complete GGUF file; download or convert it again"
        ) from err
    lm.hf_quantizer = None
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config
    lm.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def token_batches(lengths: Sequence[int], size: int, max_tokens: int) -> list[range]:
    """Consecutive batches of requests sorted longest first: at most `size` requests and, padded to the
    batch's first (longest) one, at most `max_tokens` tokens; a request longer than that goes alone.

    Args:
        lengths: each request's prompt tokens (times its rows), longest first.

    Returns:
        The batches as ranges of positions in `lengths`.

    >>> token_batches([900, 800, 300, 200, 100], 8, 2000)
    [range(0, 2), range(2, 5)]
    >>> token_batches([5000, 10, 10], 2, 4096)
    [range(0, 1), range(1, 3)]
    """
    batches, start = [], 0
    while start < len(lengths):
        fits = max(1, min(size, max_tokens // max(lengths[start], 1)))
        batches.append(range(start, min(start + fits, len(lengths))))
        start += fits
    return batches


class _TokenCount:
    """A `generate` streamer that counts the tokens generated so far and shows them on the progress bar
    (transformers calls `put` once with the prompts, then once per step with each row's new token)."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.count = 0
        self.prompts = True

    def put(self, value: Any) -> None:
        if self.prompts:  # each batch's first call: the prompts
            self.prompts = False
            return
        self.count += int(value.numel())
        progress.tokens(self.bar, self.count)

    def end(self) -> None:
        self.prompts = True  # the next batch starts with its prompts


class SeededSampler:
    """The last logits processor of sampled decoding: draws each row's token with that row's own generator.

    Gumbel-max: ``argmax(scores + G)``, with ``G = -log(-log(U))`` and U uniform per token, is a sample from
    ``softmax(scores)``. Returning ``scores + G`` to a greedy search makes its argmax that sample, so a row's
    tokens depend only on its own logits and its own generator, never on the other rows of the batch.

    Args:
        generators: one seeded `torch.Generator` per row of the batch, on the model's device.
    """

    def __init__(self, generators: Sequence[Any]) -> None:
        self.generators = list(generators)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if scores.shape[0] != len(self.generators):
            raise RuntimeError(f"{scores.shape[0]} rows to sample but {len(self.generators)} generators")
        uniform = scores.new_empty(scores.shape, dtype=scores.dtype)
        for row, generator in enumerate(self.generators):
            uniform[row].uniform_(generator=generator)
        return scores - uniform.log().neg().log()


class HFEngine:
    """A transformers causal LM (optionally with a PEFT LoRA adapter) answering chat requests.

    Args:
        model: Hub id or local folder of a chat model (its tokenizer must have a chat template).
        options: see `HFOptions`; default: its defaults.
        adapter: folder of a PEFT adapter to load on top, or None.
    """

    name = "hf"

    def __init__(self, model: str, options: HFOptions | None = None, *, adapter: str | None = None) -> None:
        options = options or HFOptions()
        self.model = model
        self.adapter = adapter
        self.options = options
        check_local_path(model, "--model")
        if adapter is not None:
            check_local_path(adapter, "--adapter")
        logger.info("hf engine: importing torch and transformers, then loading %s", model)
        self._torch = require("torch", "hf", by=_ENGINE)
        transformers = require("transformers", "hf", by=_ENGINE)
        self._transformers = transformers
        self.device = options.device or ("cuda" if self._torch.cuda.is_available() else "cpu")
        self._check_device()
        trust_remote_code = options.trust_remote_code
        location, self._gguf = gguf_location(model)
        if self._gguf:
            if not Path(model).is_file():
                raise ConfigError(f"no GGUF file at {model}: give the path of a .gguf file")
            require("gguf", "hf", by=_ENGINE)

        with _loading(model):
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                location, trust_remote_code=trust_remote_code, **self._gguf
            )
        if not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(
                f"the tokenizer of {model!r} has no chat template: use an instruction-tuned (chat) model, "
                "or save one with tokenizer.chat_template = ... and tokenizer.save_pretrained(...)"
            )
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            if self.tokenizer.eos_token is None:
                raise ConfigError(f"the tokenizer of {model!r} has neither a pad nor an eos token")
            logger.info("%s has no pad token: padding with eos %r", model, self.tokenizer.eos_token)
            self.tokenizer.pad_token = self.tokenizer.eos_token

        with _loading(model):
            lm = transformers.AutoModelForCausalLM.from_pretrained(
                location, dtype=options.dtype, trust_remote_code=trust_remote_code, **self._gguf
            )
        # The adapters loaded into `lm` (name -> path), shared with the views `with_adapter` returns; the
        # adapter this engine generates with (None: the base model, with any loaded adapter switched off).
        self._adapters: dict[str, str] = {}
        self._counted: _TokenCount | None = None  # the running generation's token count (progress bar)
        self._adapter_name: str | None = None
        if adapter is not None:
            peft = require("peft", "hf", by=_ENGINE)
            with _loading(adapter, "--adapter"):
                lm = peft.PeftModel.from_pretrained(lm, adapter)
            if options.merge_adapter:
                lm = lm.merge_and_unload()
            else:
                self._adapters["default"] = adapter
                self._adapter_name = "default"
        self.lm = lm.to(self.device).eval()
        self.ignored_generation_defaults = self._neutralize_generation_config()
        self.max_positions: int | None = getattr(self.lm.config, "max_position_embeddings", None)
        self._structured: Any = None  # the outlines backend, built on the first constrained request
        self._formats: dict[str, str] = {}  # answer format -> its regex (formats may share one)
        self._indexes: dict[str, Any] = {}  # regex -> its outlines-core index, built once

    def format_processor(self, answer_format: str) -> Any:
        """A fresh logits processor that keeps every row of one batch within `answer_format`.

        Fresh per batch: it tracks each row's position in the format from its first call. The index of
        a regex is built once per engine and shared by the formats that have that regex (LLMRec's
        sequential and direct lists): it stores, per state of the regex's automaton, every token that keeps
        the answer in the format, so its size is about states x vocabulary (a bounded repetition such as
        ``{1,300}`` is 300 states; benchmarks/structured_bench.py measures each format's).
        """
        from perrec_eval.registry import answer_regex

        backends = require("outlines.backends.outlines_core", "structured", by=_ENGINE)
        if self._structured is None:
            outlines = require("outlines", "structured", by=_ENGINE)
            self._structured = backends.OutlinesCoreBackend(
                outlines.from_transformers(self.lm, self.tokenizer)
            )
        regex = self._formats.setdefault(answer_format, answer_regex(answer_format))
        if regex not in self._indexes:
            index_class = require("outlines_core", "structured", by=_ENGINE).Index
            self._indexes[regex] = index_class(regex, self._structured.vocabulary)
        return backends.OutlinesCoreLogitsProcessor(self._indexes[regex], "torch")

    def _check_device(self) -> None:
        """Refuse a device this machine does not have before anything is loaded."""
        kind, _, index = self.device.partition(":")
        if kind != "cuda":
            return
        fix = "use --engine-arg device=cpu, or leave device unset (CUDA if available, else CPU)"
        if not self._torch.cuda.is_available():
            raise ConfigError(f"device={self.device} but this torch sees no CUDA GPU: {fix}")
        count = self._torch.cuda.device_count()
        if index and (not (index.isascii() and index.isdigit()) or int(index) >= count):
            raise ConfigError(f"device={self.device} but this machine has {count} CUDA GPU(s): {fix}")

    def _neutralize_generation_config(self) -> dict[str, Any]:
        """Keep only special token ids from the checkpoint's generation config; return what was dropped."""
        original = self.lm.generation_config
        kept = {field: getattr(original, field, None) for field in _TOKEN_ID_FIELDS}
        if kept["eos_token_id"] is None:
            kept["eos_token_id"] = self.tokenizer.eos_token_id
        if kept["pad_token_id"] is None:
            kept["pad_token_id"] = self.tokenizer.pad_token_id
        dropped = {
            field: value
            for field, value in original.to_diff_dict().items()
            if field not in _TOKEN_ID_FIELDS and field != "transformers_version"
        }
        if dropped:
            logger.debug("ignoring generation defaults of %s: %s", self.model, dropped)  # run.json has them
        self.lm.generation_config = self._transformers.GenerationConfig(
            **{field: value for field, value in kept.items() if value is not None}
        )
        return dropped

    def generation_config(self, params: GenParams) -> Any:
        """The complete `GenerationConfig` used for `params` (neutral values for everything not in GenParams).

        Always a greedy search of one sequence per row: sampled decoding adds `sampling_processors` (and one
        row per sample); greedy decoding (temperature 0) generates one sequence that `generate` repeats ``n``
        times.
        """
        return self._transformers.GenerationConfig(
            do_sample=False,
            top_k=None,
            top_p=None,
            temperature=None,
            min_p=None,
            typical_p=1.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            num_beams=1,
            max_new_tokens=params.max_tokens,
            min_new_tokens=0,
            num_return_sequences=1,
            eos_token_id=self.lm.generation_config.eos_token_id,
            pad_token_id=self.lm.generation_config.pad_token_id,
        )

    def sampling_processors(self, params: GenParams, seeds: Sequence[int]) -> Any:
        """Temperature, top-p (when below 1) and a `SeededSampler` with one generator per seed (row).

        Args:
            params: sampling parameters with temperature > 0.
            seeds: one seed per row of the batch, in row order.

        Returns:
            A `LogitsProcessorList` for `generate(logits_processor=...)`.
        """
        transformers = self._transformers
        processors = [transformers.TemperatureLogitsWarper(params.temperature)]
        if params.top_p < 1.0:
            processors.append(transformers.TopPLogitsWarper(params.top_p))
        generators = [self._torch.Generator(device=self.device).manual_seed(seed) for seed in seeds]
        processors.append(SeededSampler(generators))
        return transformers.LogitsProcessorList(processors)

    def encode(self, request: ChatRequest) -> list[int]:
        """Token ids of the templated conversation, ending with the assistant generation prompt."""
        text = self.tokenizer.apply_chat_template(
            [dict(message) for message in request.messages], tokenize=False, add_generation_prompt=True
        )
        # The template already wrote any BOS/special tokens.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def generate(
        self,
        requests: Sequence[ChatRequest],
        params: GenParams,
        *,
        on_results: ResultsCallback | None = None,
    ) -> list[Completion]:
        """Complete every request; batches are formed longest prompt first.

        Args:
            requests: the conversations to complete.
            params: sampling parameters (see `generation_config`).
            on_results: called with the prompts too long for the model (as failures) and with each batch.

        Returns:
            One completion per request, in order.
        """
        encoded = [self.encode(request) for request in requests]
        results: list[Completion | None] = [None] * len(requests)
        runnable = []
        for index, ids in enumerate(encoded):
            if self.max_positions is not None and len(ids) + params.max_tokens > self.max_positions:
                results[index] = Completion(
                    texts=(),
                    prompt_tokens=len(ids),
                    error=f"prompt of {len(ids)} tokens + max_tokens {params.max_tokens} exceeds the "
                    f"model's {self.max_positions} positions",
                )
            else:
                runnable.append(index)
        if on_results is not None and len(runnable) < len(requests):
            on_results([(index, result) for index, result in enumerate(results) if result is not None])

        order = sorted(runnable, key=lambda index: -len(encoded[index]))
        rows = params.n if params.temperature > 0 else 1  # a sampled request is n rows
        lengths = [len(encoded[index]) * rows for index in order]
        seeds = self._row_seeds(requests, params)
        bar = progress.requests(len(requests), f"hf {self.model}")
        bar.update(len(requests) - len(runnable))
        self._counted = _TokenCount(bar) if progress.enabled() else None
        for span in token_batches(lengths, self.options.batch_size, self.options.max_batch_tokens):
            batch = order[span.start : span.stop]
            finished = self._run_batch(batch, encoded, seeds, params)
            for index, completion in finished:
                results[index] = completion
            if on_results is not None:
                on_results(finished)
            bar.update(len(batch))
        bar.close()
        return [completion for completion in results if completion is not None]

    @staticmethod
    def _row_seeds(requests: Sequence[ChatRequest], params: GenParams) -> list[list[int]]:
        """The seeds of each request's `n` sample rows ([] for greedy decoding; fresh ones when unseeded)."""
        if params.temperature == 0:
            return [[] for _ in requests]
        return [
            [
                secrets.randbelow(2**31) if params.seed is None else sample_seed(params.seed, request, sample)
                for sample in range(params.n)
            ]
            for request in requests
        ]

    def _run_batch(
        self, batch: list[int], encoded: list[list[int]], seeds: list[list[int]], params: GenParams
    ) -> list[tuple[int, Completion]]:
        """Generate for one batch (one row per sample when sampling); on out-of-memory, split it in halves."""
        torch = self._torch
        sampled = params.temperature > 0
        rows = params.n if sampled else 1
        row_seeds = [seed for index in batch for seed in seeds[index]]
        processors = self.sampling_processors(params, row_seeds) if sampled else None
        if params.answer_format is not None:  # the format's mask comes before any sampling step
            mask = self.format_processor(params.answer_format)
            processors = self._transformers.LogitsProcessorList([mask, *(processors or [])])
        try:
            inputs = self.tokenizer.pad(
                {"input_ids": [encoded[index] for index in batch]}, padding=True, return_tensors="pt"
            ).to(self.device)
            inputs = {name: tensor.repeat_interleave(rows, dim=0) for name, tensor in inputs.items()}
            with torch.inference_mode(), self._adapter_scope():
                output = self.lm.generate(
                    **inputs,
                    generation_config=self.generation_config(params),
                    logits_processor=processors,
                    streamer=self._counted,
                )
        except torch.OutOfMemoryError:
            if len(batch) == 1:
                raise
            logger.warning("out of memory on a batch of %d: splitting it in two", len(batch))
            half = len(batch) // 2
            return self._run_batch(batch[:half], encoded, seeds, params) + self._run_batch(
                batch[half:], encoded, seeds, params
            )
        width = inputs["input_ids"].shape[1]
        sequences_per_request = output.shape[0] // len(batch)
        finished = []
        for row, index in enumerate(batch):
            texts, reasons, generated = [], [], 0
            for sequence in output[row * sequences_per_request : (row + 1) * sequences_per_request]:
                text, length, reason = self._decode(sequence[width:].tolist())
                texts.append(text)
                reasons.append(reason)
                generated += length
            if sequences_per_request < params.n:  # greedy: one sequence stands for all n identical samples
                texts, reasons, generated = texts * params.n, reasons * params.n, generated * params.n
            finished.append(
                (
                    index,
                    Completion(
                        texts=tuple(texts),
                        prompt_tokens=len(encoded[index]),
                        completion_tokens=generated,
                        extra={"finish_reasons": reasons},
                    ),
                )
            )
        return finished

    def _decode(self, new_tokens: list[int]) -> tuple[str, int, str]:
        """Text, generated-token count (including the stop token) and finish reason of one sequence."""
        stop_ids = self.lm.generation_config.eos_token_id
        stop_ids = set(stop_ids if isinstance(stop_ids, list) else [stop_ids])
        for position, token in enumerate(new_tokens):
            if token in stop_ids:
                kept = new_tokens[:position]
                return self.tokenizer.decode(kept, skip_special_tokens=True), position + 1, "stop"
        return self.tokenizer.decode(new_tokens, skip_special_tokens=True), len(new_tokens), "length"

    def with_adapter(self, name: str, path: str) -> HFEngine:
        """This engine answering with LoRA adapter `path` under `name`, sharing the loaded base weights.

        The adapter is loaded once into the shared model (`PeftModel.from_pretrained` for the first,
        `load_adapter` after); the returned view switches to it (`set_adapter`) before each generation,
        and the engine without an adapter generates with every adapter switched off
        (`disable_adapter`), so each answers as if it were loaded alone. The view's `adapter` is `path`.

        Raises:
            ConfigError: `name` is already loaded from another path, holds a ``.`` (PEFT keeps adapters in
                torch module dicts, whose keys cannot), or an adapter was merged into the weights
                (``merge_adapter=true``).
        """
        if "." in name:
            raise ConfigError(
                f"--adapter {name}=...: the hf engine cannot load an adapter whose name holds a '.' (PEFT "
                f"module names): name it with --adapter {name.replace('.', '-')}={path}"
            )
        if self.options.merge_adapter and self.adapter is not None:
            raise ConfigError(
                "merge_adapter=true merged the adapter into the base weights: leave it off to evaluate "
                "several adapters on one base model"
            )
        loaded = self._adapters.get(name)
        if loaded is not None and loaded != path:
            raise ConfigError(
                f"adapter name {name!r} is already loaded from {loaded}: give {path} another name"
            )
        if loaded is None:
            peft = require("peft", "hf", by=_ENGINE)
            with _loading(path, "--adapter"):
                if isinstance(self.lm, peft.PeftModel):
                    self.lm.load_adapter(path, adapter_name=name)
                else:
                    # Wrapping injects the LoRA layers into the base model's modules in place; this engine
                    # itself then answers through `disable_adapter` (see `_adapter_scope`).
                    self.lm = peft.PeftModel.from_pretrained(self.lm, path, adapter_name=name)
            self.lm.to(self.device).eval()
            self._adapters[name] = path
        view = copy.copy(self)
        view.adapter, view._adapter_name = path, name
        return view

    def _adapter_scope(self) -> contextlib.AbstractContextManager:
        """Around a generation: this engine's adapter switched on, or every loaded adapter switched off."""
        if self._adapter_name is not None:
            self.lm.set_adapter(self._adapter_name)
            return contextlib.nullcontext()
        if self._adapters:
            return self.lm.disable_adapter()
        return contextlib.nullcontext()

    def info(self) -> dict[str, Any]:
        """Model, adapter, device, dtype, batch size, library versions and the dropped generation defaults."""
        info: dict[str, Any] = {
            "name": self.name,
            "model": self.model,
            "adapter": self.adapter,
            "device": self.device,
            "dtype": str(self.lm.dtype),
            "batch_size": self.options.batch_size,
            "max_batch_tokens": self.options.max_batch_tokens,
            "transformers_version": self._transformers.__version__,
            "torch_version": self._torch.__version__,
            "ignored_generation_defaults": self.ignored_generation_defaults,
        }
        if self._gguf:
            info["gguf_file"] = self._gguf["gguf_file"]
            info["weights"] = f"GGUF dequantized to {self.lm.dtype} by transformers"
        elif (source := converted_from(self.model)) is not None:
            info["converted_from"] = source  # `perrecbench convert-gguf` wrote the folder
        if self._structured is not None:
            info["structured_outputs"] = {
                "backend": "outlines-core",
                "outlines_version": importlib.metadata.version("outlines"),
                "formats": sorted(self._formats),
            }
        if self.adapter is not None:
            info["peft_version"] = require("peft", "hf", by=_ENGINE).__version__
        if self._adapter_name not in (None, "default"):
            info["adapter_name"] = self._adapter_name
        return info
