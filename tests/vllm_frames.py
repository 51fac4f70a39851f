"""Server-sent frames built the way vLLM builds them, for tests (vLLM itself needs torch: not here).

Read from the released wheels' own code (vllm-0.9.1-cp38-abi3-manylinux1_x86_64.whl, the nxd-draft
stack's image; vllm-0.29.0-cp38-abi3-manylinux_2_28_x86_64.whl, the vllm-neuron stack's):
- the response classes, mirrored field for field as pydantic models below (same defaults, same
  ``extra="allow"``), 0.9.1 ``vllm/entrypoints/openai/protocol.py``; 0.29.0
  ``vllm/entrypoints/serve/engine/protocol.py`` (UsageInfo), ``vllm/entrypoints/generate/base/protocol.py``
  (DeltaMessage, PerRequestMetrics), ``vllm/entrypoints/openai/{completion,chat_completion}/protocol.py``;
- the stream generators, mirrored frame for frame: 0.9.1 ``serving_completion.py``
  (``completion_stream_generator``) and ``serving_chat.py`` (``chat_completion_stream_generator``);
  0.29.0 ``vllm/entrypoints/openai/completion/serving.py`` and ``chat_completion/serving.py`` (same
  names). Which fields a frame shows is pydantic's doing: each frame is dumped with the same
  ``exclude_unset`` / ``exclude_none`` arguments vLLM passes, on models built with the same arguments;
- what the engine hands them, one delta output per engine step (``engine_outputs``): a token whose
  bytes end inside a UTF-8 character decodes to "" until the character completes (0.9.1
  ``transformers_utils/detokenizer_utils.py`` detokenize_incrementally: ``new_text.endswith("�")``
  returns ""; 0.29.0 ``v1/engine/detokenizer.py`` FastIncrementalDetokenizer.decode_next:
  ``return token or ""``), and the end-of-sequence token is counted but never detokenized (0.9.1
  ``engine/output_processor/stop_checker.py`` strips its text; 0.29.0 detokenizer ``update`` skips the
  stop token when ``stop_terminated``); one output per step (0.29.0 ``config/scheduler.py``
  ``stream_interval: int = Field(default=1)``).
Only the paths the benchmark's requests take (n=1, no logprobs, no echo, no tool or reasoning parser).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, model_serializer

VERSIONS = ("0.9.1", "0.29.0")
APIS = ("chat", "completions")
KEEP_ALIVE = ": keep-alive\n\n"  # 0.29.0 vllm/entrypoints/openai/sse_keep_alive.py SSE_KEEP_ALIVE_COMMENT
DONE = "data: [DONE]\n\n"
CREATED = 1764547200


class OpenAIBaseModel(BaseModel):
    model_config = ConfigDict(extra="allow")  # both versions: "OpenAI API does allow extra fields"


# --- 0.9.1: vllm/entrypoints/openai/protocol.py ------------------------------------------------


class PromptTokenUsageInfo091(OpenAIBaseModel):
    cached_tokens: int | None = None


class UsageInfo091(OpenAIBaseModel):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: PromptTokenUsageInfo091 | None = None


class CompletionResponseStreamChoice091(OpenAIBaseModel):
    index: int
    text: str
    logprobs: Any | None = None  # CompletionLogProbs: never asked by the benchmark
    finish_reason: str | None = None
    stop_reason: int | str | None = None


class CompletionStreamResponse091(OpenAIBaseModel):
    id: str
    object: str = "text_completion"
    created: int = CREATED
    model: str
    choices: list[CompletionResponseStreamChoice091]
    usage: UsageInfo091 | None = Field(default=None)


class DeltaFunctionCall(BaseModel):
    name: str | None = None
    arguments: str | None = None


class DeltaToolCall(OpenAIBaseModel):
    id: str | None = None
    type: Literal["function"] | None = None
    index: int
    function: DeltaFunctionCall | None = None


class DeltaMessage091(OpenAIBaseModel):
    role: str | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[DeltaToolCall] = Field(default_factory=list)


class ChatCompletionResponseStreamChoice091(OpenAIBaseModel):
    index: int
    delta: DeltaMessage091
    logprobs: Any | None = None  # ChatCompletionLogProbs: never asked
    finish_reason: str | None = None
    stop_reason: int | str | None = None


class ChatCompletionStreamResponse091(OpenAIBaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int = CREATED
    model: str
    choices: list[ChatCompletionResponseStreamChoice091]
    usage: UsageInfo091 | None = Field(default=None)


# --- 0.29.0 ------------------------------------------------------------------------------------


class PromptTokenUsageInfo0290(OpenAIBaseModel):  # vllm/entrypoints/serve/engine/protocol.py
    cached_tokens: int | None = None
    created_cache_tokens: int | None = None
    multimodal_tokens: dict[str, int] | None = None


class CompletionTokenUsageInfo0290(OpenAIBaseModel):
    reasoning_tokens: int = 0


class UsageInfo0290(OpenAIBaseModel):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: PromptTokenUsageInfo0290 | None = None
    completion_tokens_details: CompletionTokenUsageInfo0290 | None = None


class SpeculativeDecodingMetrics0290(OpenAIBaseModel):  # vllm/entrypoints/generate/base/protocol.py
    mean_acceptance_length: float
    draft_acceptance_rate: float
    acceptance_histogram: list[int]
    num_spec_steps: int
    num_accepted_draft_tokens: int
    num_draft_tokens: int
    num_spec_tokens: int
    per_step_accepted: list[int] | None = None
    per_step_drafted: list[int] | None = None


class PerRequestMetrics0290(OpenAIBaseModel):
    time_to_first_token_ms: float | None = None
    generation_time_ms: float | None = None
    queue_time_ms: float | None = None
    mean_itl_ms: float | None = None
    tokens_per_second: float | None = None
    speculative_decoding: SpeculativeDecodingMetrics0290 | None = None


class DeltaMessage0290(OpenAIBaseModel):
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[DeltaToolCall] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: Any) -> Any:  # 0.29.0 drops an empty tool_calls list
        data = handler(self)
        if len(data.get("tool_calls", [])) == 0:
            data.pop("tool_calls", None)
        return data


class CompletionResponseStreamChoice0290(OpenAIBaseModel):  # vllm/entrypoints/openai/completion/protocol.py
    index: int
    text: str
    logprobs: Any | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None


class CompletionStreamResponse0290(OpenAIBaseModel):
    id: str
    object: str = "text_completion"
    created: int = CREATED
    model: str
    choices: list[CompletionResponseStreamChoice0290]
    usage: UsageInfo0290 | None = Field(default=None)
    system_fingerprint: str | None = None
    metrics: PerRequestMetrics0290 | None = None


class ChatCompletionResponseStreamChoice0290(OpenAIBaseModel):  # .../chat_completion/protocol.py
    index: int
    delta: SerializeAsAny[DeltaMessage0290]
    logprobs: Any | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None


class ChatCompletionStreamResponse0290(OpenAIBaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int = CREATED
    model: str
    choices: list[ChatCompletionResponseStreamChoice0290]
    usage: UsageInfo0290 | None = Field(default=None)
    system_fingerprint: str | None = None
    prompt_token_ids: list[int] | None = None
    prompt_text: str | None = None
    metrics: PerRequestMetrics0290 | None = None


# --- what the engine hands the stream generator --------------------------------------------------


@dataclass(frozen=True)
class Token:
    id: int
    piece: bytes  # the bytes a byte-level BPE token stands for; the EOS token's are never shown
    eos: bool = False


EOS = Token(151645, b"", eos=True)  # an end-of-sequence token (Qwen3's <|im_end|> id)


@dataclass(frozen=True)
class Output:
    """One engine step's delta (vllm.outputs.CompletionOutput with RequestOutputKind.DELTA, n=1)."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: str | None = None
    stop_reason: int | str | None = None


def byte_tokens(text: str, first_id: int = 1000) -> list[Token]:
    """``text`` as byte-level tokens: each ASCII run of a word (with its leading space) one token,
    each non-ASCII character two tokens splitting its UTF-8 bytes (as byte-level BPE does for an
    emoji, a CJK character or an accented letter outside the merges)."""
    tokens: list[Token] = []
    word = ""
    for char in text:
        if char.isascii() and not (char == " " and word.strip()):
            word += char
            continue
        if word:
            tokens.append(Token(first_id + len(tokens), word.encode()))
            word = ""
        if char.isascii():  # a space that opens the next word
            word = char
            continue
        data = char.encode("utf-8")
        cut = len(data) // 2
        tokens += [Token(first_id + len(tokens), data[:cut]), Token(first_id + len(tokens) + 1, data[cut:])]
    if word:
        tokens.append(Token(first_id + len(tokens), word.encode()))
    return tokens


def steps_of(tokens: Sequence[Token], sizes: Iterable[int] = ()) -> list[list[Token]]:
    """``tokens`` cut into engine steps of ``sizes`` tokens (a speculative step's accepted + 1), one
    token a step once ``sizes`` runs out (a server that does not speculate)."""
    steps, at = [], 0
    for size in sizes:
        if at >= len(tokens):
            break
        steps.append(list(tokens[at : at + size]))
        at += size
    steps += [[token] for token in tokens[at:]]
    return steps


def engine_outputs(steps: Iterable[Sequence[Token]], max_tokens: int) -> list[Output]:
    """The delta outputs of a request that generates ``steps``: text is held back while the bytes end
    inside a character; EOS finishes with "stop" (counted, no text), max_tokens with "length". An
    empty step is a chunked-prefill step (no token yet)."""
    outputs, pending, generated = [], b"", 0
    for step in steps:
        ids, text, finish = [], "", None
        for token in step:
            ids.append(token.id)
            generated += 1
            if token.eos:
                finish = "stop"
                break
            pending += token.piece
            try:
                text, pending = text + pending.decode("utf-8"), b""
            except UnicodeDecodeError:
                pass  # an unfinished character: nothing to show yet
            if generated == max_tokens:
                finish = "length"
                break
        outputs.append(Output(text, tuple(ids), finish))
        if finish:
            break
    return outputs


# --- the stream generators -----------------------------------------------------------------------


def _sse(data: str) -> str:
    return f"data: {data}\n\n"


def completions_091(
    outputs: Sequence[Output], model: str, prompt_tokens: int, include_usage: bool = True, continuous: bool = True
) -> list[str]:
    """0.9.1 serving_completion.py completion_stream_generator (one prompt, n=1)."""
    frames, previous_num_tokens, request_id = [], 0, "cmpl-0f1e2d3c"
    continuous = include_usage and continuous
    for output in outputs:
        if not output.text and not output.token_ids and not previous_num_tokens:
            continue  # "Chunked prefill case, don't return empty chunks"
        previous_num_tokens += len(output.token_ids)
        chunk = CompletionStreamResponse091(
            id=request_id,
            created=CREATED,
            model=model,
            choices=[
                CompletionResponseStreamChoice091(
                    index=0, text=output.text, logprobs=None, finish_reason=output.finish_reason, stop_reason=output.stop_reason
                )
            ],
        )
        if continuous:
            chunk.usage = UsageInfo091(
                prompt_tokens=prompt_tokens, completion_tokens=previous_num_tokens, total_tokens=prompt_tokens + previous_num_tokens
            )
        frames.append(_sse(chunk.model_dump_json(exclude_unset=False)))
    if include_usage:
        final = CompletionStreamResponse091(
            id=request_id,
            created=CREATED,
            model=model,
            choices=[],
            usage=UsageInfo091(
                prompt_tokens=prompt_tokens, completion_tokens=previous_num_tokens, total_tokens=prompt_tokens + previous_num_tokens
            ),
        )
        frames.append(_sse(final.model_dump_json(exclude_unset=False, exclude_none=True)))
    return [*frames, DONE]


def chat_091(outputs: Sequence[Output], model: str, prompt_tokens: int, include_usage: bool = True, continuous: bool = True) -> list[str]:
    """0.9.1 serving_chat.py chat_completion_stream_generator (n=1, no tool or reasoning parser)."""
    request_id, object_type = "chatcmpl-0f1e2d3c", "chat.completion.chunk"
    continuous = include_usage and continuous
    role = ChatCompletionStreamResponse091(
        id=request_id,
        object=object_type,
        created=CREATED,
        model=model,
        choices=[
            ChatCompletionResponseStreamChoice091(
                index=0, delta=DeltaMessage091(role="assistant", content=""), logprobs=None, finish_reason=None
            )
        ],
    )
    if continuous:
        role.usage = UsageInfo091(prompt_tokens=prompt_tokens, completion_tokens=0, total_tokens=prompt_tokens)
    frames, previous_num_tokens = [_sse(role.model_dump_json(exclude_unset=True))], 0
    for output in outputs:
        if not output.text and not output.token_ids and not previous_num_tokens:
            continue
        delta = DeltaMessage091(content=output.text)
        previous_num_tokens += len(output.token_ids)
        if output.finish_reason is None:
            choice = ChatCompletionResponseStreamChoice091(index=0, delta=delta, logprobs=None, finish_reason=None)
        else:
            choice = ChatCompletionResponseStreamChoice091(
                index=0, delta=delta, logprobs=None, finish_reason=output.finish_reason, stop_reason=output.stop_reason
            )
        chunk = ChatCompletionStreamResponse091(id=request_id, object=object_type, created=CREATED, choices=[choice], model=model)
        if continuous:
            chunk.usage = UsageInfo091(
                prompt_tokens=prompt_tokens, completion_tokens=previous_num_tokens, total_tokens=prompt_tokens + previous_num_tokens
            )
        frames.append(_sse(chunk.model_dump_json(exclude_none=True)))
        if output.finish_reason is not None:
            break  # finish_reason_sent
    if include_usage:
        final = ChatCompletionStreamResponse091(
            id=request_id,
            object=object_type,
            created=CREATED,
            choices=[],
            model=model,
            usage=UsageInfo091(
                prompt_tokens=prompt_tokens, completion_tokens=previous_num_tokens, total_tokens=prompt_tokens + previous_num_tokens
            ),
        )
        frames.append(_sse(final.model_dump_json(exclude_unset=True, exclude_none=True)))
    return [*frames, DONE]


@dataclass(frozen=True)
class Extras0290:
    """0.29.0's optional fields: ``return_token_ids`` on the request, the server's fingerprint
    (``--fingerprint-mode full`` by default: ``vllm-<version>-<hash8>``) and the per-request
    speculative-decoding metrics that ride on the final usage frame."""

    return_token_ids: bool = False
    prompt_token_ids: tuple[int, ...] = ()
    system_fingerprint: str | None = "vllm-0.29.0-tp4-3f9a2c1b"
    speculative: SpeculativeDecodingMetrics0290 | None = None


def _metrics_0290(extras: Extras0290) -> PerRequestMetrics0290 | None:
    return None if extras.speculative is None else PerRequestMetrics0290(speculative_decoding=extras.speculative)


def completions_0290(
    outputs: Sequence[Output],
    model: str,
    prompt_tokens: int,
    include_usage: bool = True,
    continuous: bool = True,
    extras: Extras0290 = Extras0290(),  # noqa: B008 - frozen
) -> list[str]:
    """0.29.0 completion/serving.py completion_stream_generator (one prompt, n=1, no echo)."""
    frames, previous_num_tokens, has_echoed, request_id = [], 0, False, "cmpl-0f1e2d3c-0"
    continuous = include_usage and continuous
    prompt_ids = list(extras.prompt_token_ids) or None
    for output in outputs:
        prompt_token_ids_to_return = None
        if not has_echoed and extras.return_token_ids:
            prompt_token_ids_to_return, has_echoed = prompt_ids, True
        if not output.text and not output.token_ids and not previous_num_tokens:
            continue
        previous_num_tokens += len(output.token_ids)
        chunk = CompletionStreamResponse0290(
            id=request_id,
            object="text_completion",
            created=CREATED,
            model=model,
            choices=[
                CompletionResponseStreamChoice0290(
                    index=0,
                    text=output.text,
                    logprobs=None,
                    finish_reason=output.finish_reason,
                    stop_reason=output.stop_reason,
                    prompt_token_ids=prompt_token_ids_to_return,
                    token_ids=list(output.token_ids) if extras.return_token_ids else None,
                )
            ],
        )
        if not include_usage and extras.system_fingerprint is not None and output.finish_reason is not None:
            chunk.system_fingerprint = extras.system_fingerprint
        if continuous:
            chunk.usage = UsageInfo0290(
                prompt_tokens=prompt_tokens, completion_tokens=previous_num_tokens, total_tokens=prompt_tokens + previous_num_tokens
            )
        frames.append(_sse(chunk.model_dump_json(exclude_unset=True)))
    if include_usage:
        final = CompletionStreamResponse0290(
            id=request_id,
            created=CREATED,
            model=model,
            choices=[],
            usage=UsageInfo0290(
                prompt_tokens=prompt_tokens, completion_tokens=previous_num_tokens, total_tokens=prompt_tokens + previous_num_tokens
            ),
            system_fingerprint=extras.system_fingerprint,
            metrics=_metrics_0290(extras),
        )
        frames.append(_sse(final.model_dump_json(exclude_unset=False, exclude_none=True)))
    return [*frames, DONE]


def chat_0290(
    outputs: Sequence[Output],
    model: str,
    prompt_tokens: int,
    include_usage: bool = True,
    continuous: bool = True,
    extras: Extras0290 = Extras0290(),  # noqa: B008 - frozen
) -> list[str]:
    """0.29.0 chat_completion/serving.py chat_completion_stream_generator (n=1, no parser: the
    benchmark's servers run no tool or reasoning parser, so every step's text is a DeltaMessage)."""
    request_id, object_type = "chatcmpl-0f1e2d3c", "chat.completion.chunk"
    continuous = include_usage and continuous
    role = ChatCompletionStreamResponse0290(
        id=request_id,
        object=object_type,
        created=CREATED,
        choices=[
            ChatCompletionResponseStreamChoice0290(
                index=0, delta=DeltaMessage0290(role="assistant", content=""), logprobs=None, finish_reason=None
            )
        ],
        model=model,
        prompt_token_ids=list(extras.prompt_token_ids) if extras.return_token_ids else None,
        prompt_text=None,  # only with return_prompt_text
    )
    if continuous:
        role.usage = UsageInfo0290(
            prompt_tokens=prompt_tokens, completion_tokens=0, total_tokens=prompt_tokens, completion_tokens_details=None
        )
    frames, previous_num_tokens = [_sse(role.model_dump_json(exclude_unset=True))], 0
    for output in outputs:
        if not output.text and not output.token_ids and not previous_num_tokens:
            continue
        delta = DeltaMessage0290(content=output.text)
        previous_num_tokens += len(output.token_ids)
        token_ids = list(output.token_ids) if extras.return_token_ids else None
        if output.finish_reason is None:
            choice = ChatCompletionResponseStreamChoice0290(index=0, delta=delta, logprobs=None, finish_reason=None, token_ids=token_ids)
        else:
            choice = ChatCompletionResponseStreamChoice0290(
                index=0, delta=delta, logprobs=None, finish_reason=output.finish_reason, stop_reason=output.stop_reason, token_ids=token_ids
            )
        chunk = ChatCompletionStreamResponse0290(id=request_id, object=object_type, created=CREATED, choices=[choice], model=model)
        if not include_usage and extras.system_fingerprint is not None and choice.finish_reason is not None:
            chunk.system_fingerprint = extras.system_fingerprint
        if continuous:
            chunk.usage = UsageInfo0290(
                prompt_tokens=prompt_tokens,
                completion_tokens=previous_num_tokens,
                total_tokens=prompt_tokens + previous_num_tokens,
                completion_tokens_details=None,
            )
        frames.append(_sse(chunk.model_dump_json(exclude_unset=True)))
        if output.finish_reason is not None:
            break
    if include_usage:
        usage = UsageInfo0290(
            prompt_tokens=prompt_tokens,
            completion_tokens=previous_num_tokens,
            total_tokens=prompt_tokens + previous_num_tokens,
            completion_tokens_details=None,
        )
        usage.prompt_tokens_details = None  # _make_prompt_tokens_details without --enable-prompt-tokens-details
        final = ChatCompletionStreamResponse0290(
            id=request_id,
            object=object_type,
            created=CREATED,
            choices=[],
            model=model,
            usage=usage,
            system_fingerprint=extras.system_fingerprint,
            metrics=_metrics_0290(extras),
        )
        frames.append(_sse(final.model_dump_json(exclude_unset=True, exclude_none=True)))
    return [*frames, DONE]


def frames(version: str, api: str, outputs: Sequence[Output], model: str, prompt_tokens: int, **options: Any) -> list[str]:
    """The stream ``version`` of vLLM sends on ``api`` for ``outputs``, each frame one string."""
    build = {
        ("0.9.1", "completions"): completions_091,
        ("0.9.1", "chat"): chat_091,
        ("0.29.0", "completions"): completions_0290,
        ("0.29.0", "chat"): chat_0290,
    }[(version, api)]
    return build(outputs, model, prompt_tokens, **options)


def with_keep_alive(stream: Sequence[str], every: int = 1) -> list[str]:
    """``stream`` with a keep-alive comment after every ``every`` frames, as 0.29.0's
    ``--sse-keep-alive-interval`` sends one whenever the generator is idle (between frames only)."""
    result = []
    for index, frame in enumerate(stream):
        if index and index % every == 0:
            result.append(KEEP_ALIVE)
        result.append(frame)
    return result
