"""Agents under test: the contract (``base``), the built-in runtime and adapters for agents we
did not write, their one factory (``factory``) and restore points built in code (``restore``)."""

from harness.kit.agents.base import AgentUnderTest, ProbeReply
from harness.kit.agents.builtin import BuiltinAgent
from harness.kit.agents.command import CommandAgent
from harness.kit.agents.openai_endpoint import OpenAIEndpointAgent

__all__ = ["AgentUnderTest", "BuiltinAgent", "CommandAgent", "OpenAIEndpointAgent", "ProbeReply"]
