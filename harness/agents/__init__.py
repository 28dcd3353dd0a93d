"""Agents under test: the built-in runtime and adapters for agents we did not write."""

from harness.agents.base import AgentUnderTest, ProbeReply
from harness.agents.builtin import BuiltinAgent

__all__ = ["AgentUnderTest", "BuiltinAgent", "ProbeReply"]
