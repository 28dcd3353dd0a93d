"""ScriptedBackbone and FunctionBackbone: deterministic replies, recorded calls, loud failures."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from runtime.backbones import (
    Backbone,
    Completion,
    FunctionBackbone,
    ProviderError,
    ScriptedBackbone,
    ScriptedReply,
    ScriptExhausted,
)
from runtime.messages import Message, ToolCall, ToolSpec, Usage, UserMessage

TOOL = ToolSpec(name="lookup", description="Look something up.")
HELLO = [UserMessage.text("hello there")]


async def test_plays_replies_in_order_and_records_calls() -> None:
    backbone = ScriptedBackbone(["first", "second"])
    seam: Backbone = backbone  # satisfies the Backbone protocol (checked by mypy)
    assert seam.context_window > 0 and seam.tool_mode == "text"
    first = await backbone.complete(HELLO, [TOOL])
    second = await backbone.complete([*HELLO, UserMessage.text("again")], [])
    assert (first.text, second.text) == ("first", "second")
    assert backbone.calls[0].messages == tuple(HELLO)
    assert backbone.calls[0].tools == (TOOL,)
    assert len(backbone.calls[1].messages) == 2 and backbone.calls[1].tools == ()
    backbone.assert_exhausted()


async def test_an_unscripted_call_fails_loudly() -> None:
    backbone = ScriptedBackbone(["only"])
    await backbone.complete(HELLO, [])
    with pytest.raises(ScriptExhausted, match=r"unexpected backbone call #2.*only 1"):
        await backbone.complete(HELLO, [])


async def test_unused_replies_are_reported() -> None:
    backbone = ScriptedBackbone(["a", "b"])
    await backbone.complete(HELLO, [])
    with pytest.raises(AssertionError, match="1 scripted repl"):
        backbone.assert_exhausted()


async def test_usage_is_estimated_unless_scripted() -> None:
    given = Usage(input_tokens=100, output_tokens=7, cached_tokens=60)
    backbone = ScriptedBackbone(["a reply of several words", ScriptedReply(text="x", usage=given)])
    estimated = await backbone.complete(HELLO, [TOOL])
    assert estimated.usage.source == "estimate"
    assert estimated.usage.input_tokens > 0 and estimated.usage.output_tokens == 5
    assert (await backbone.complete(HELLO, [])).usage == given


async def test_scripted_provider_error_is_raised() -> None:
    backbone = ScriptedBackbone([ProviderError("rate_limit", "slow down", attempts=4), "ok"])
    with pytest.raises(ProviderError) as caught:
        await backbone.complete(HELLO, [])
    assert caught.value.kind == "rate_limit" and caught.value.attempts == 4
    assert (await backbone.complete(HELLO, [])).text == "ok"


async def test_reply_functions_see_messages_and_optionally_tools() -> None:
    def echo(messages: Sequence[Message]) -> str:
        last = messages[-1]
        assert isinstance(last, UserMessage)
        return last.plain_text.upper()

    def names(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        return ",".join(tool.name for tool in tools)

    backbone = ScriptedBackbone([echo, names])
    assert (await backbone.complete(HELLO, [TOOL])).text == "HELLO THERE"
    assert (await backbone.complete(HELLO, [TOOL])).text == "lookup"


async def test_native_tool_calls_and_completions_pass_through() -> None:
    call = ToolCall(id="c1", name="lookup", arguments={"q": "x"})
    done = Completion(text="done", usage=Usage(input_tokens=3, output_tokens=1), model="m")
    backbone = ScriptedBackbone(
        [ScriptedReply(native_tool_calls=(call,)), done], tool_mode="native"
    )
    assert (await backbone.complete(HELLO, [TOOL])).native_tool_calls == (call,)
    assert await backbone.complete(HELLO, [TOOL]) is done


async def test_a_bad_reply_type_is_a_clear_error() -> None:
    backbone = ScriptedBackbone([42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must be str, ScriptedReply"):
        await backbone.complete(HELLO, [])


async def test_function_backbone_computes_every_reply_and_may_be_async() -> None:
    async def count(messages: Sequence[Message]) -> str:
        return f"{len(messages)} messages"

    backbone = FunctionBackbone(count, model="logic")
    assert (await backbone.complete(HELLO, [])).text == "1 messages"
    assert (await backbone.complete([*HELLO, *HELLO], [])).text == "2 messages"
    assert len(backbone.calls) == 2 and backbone.model == "logic"


async def test_function_backbone_may_raise_provider_errors() -> None:
    def fail(messages: Sequence[Message]) -> str:
        raise ProviderError("timeout", "took too long")

    with pytest.raises(ProviderError, match="timeout"):
        await FunctionBackbone(fail).complete(HELLO, [])
