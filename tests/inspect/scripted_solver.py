"""The scripted Inspect solver of the task tests: the replies and memory calls of the command
agent in ``tests.inspect.support`` (``reply_for``, ``recalls``, ``query_for``), made through the
memory tools the ``mirage/probe`` task offers."""

from __future__ import annotations

from typing import Any

from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ModelOutput
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import ToolCall, ToolDef

from tests.inspect.support import query_for, recalls, reply_for


async def _recall(state: TaskState, query: str) -> None:
    [tool] = [t for t in state.tools if ToolDef(t).name == "artifact_recall"]
    result: Any = await tool(query=query)
    call = ToolCall(id="recall-1", function="artifact_recall", arguments={"query": query})
    state.messages.append(ChatMessageAssistant(content="", tool_calls=[call]))
    state.messages.append(
        ChatMessageTool(content=str(result), tool_call_id=call.id, function=call.function)
    )


@solver
def scripted() -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        tag = str(state.sample_id)
        if recalls(tag):
            await _recall(state, query_for(state.input_text))
        reply = reply_for(tag)
        state.output = ModelOutput.from_content("scripted", reply)
        state.messages.append(ChatMessageAssistant(content=reply))
        return state

    return solve
