"""Agents under test: the built-in runtime and adapters for agents we did not write."""

from harness.agents.base import AgentUnderTest, ProbeReply
from harness.agents.builtin import BuiltinAgent
from harness.agents.command import CommandAgent
from harness.agents.openai_endpoint import OpenAIEndpointAgent

__all__ = ["AgentUnderTest", "BuiltinAgent", "CommandAgent", "OpenAIEndpointAgent", "ProbeReply"]
