from __future__ import annotations

from runtime.ledger import Ledger
from runtime.messages import Usage, UserMessage
from runtime.session import AgentConfig, Session
from runtime.tokens import count_message_tokens


def test_ledger_tracks_current_and_peak_eit_and_cached_tokens() -> None:
    ledger = Ledger(context_window=8192)
    ledger.record(Usage(input_tokens=1000, output_tokens=50), model="m")
    ledger.record(Usage(input_tokens=3000, output_tokens=20, cached_tokens=990), model="m")
    ledger.record(Usage(input_tokens=400, output_tokens=80), model="s", purpose="summary")
    ledger.record(Usage(input_tokens=3100, output_tokens=0), model="m", purpose="flush")
    assert ledger.current_eit == 3000
    ledger.record(Usage(input_tokens=1500, output_tokens=10, source="estimate"), model="m")
    assert ledger.current_eit == 1500
    assert ledger.peak_eit == 3000
    assert ledger.total_cached_tokens == 990
    assert ledger.total_output_tokens == 160
    assert [call.index for call in ledger.calls] == [0, 1, 2, 3, 4]
    assert ledger.calls[4].source == "estimate"
    assert ledger.headroom == 8192 - 1500


def test_session_token_estimates_are_per_message_and_roll_back() -> None:
    session = Session.new(AgentConfig(), context_window=8192)
    first = UserMessage.text("hello there")
    session.append(first)
    session.append(UserMessage.text("second message " * 50))
    assert session.message_tokens[0] == count_message_tokens(first)
    assert session.history_tokens == sum(session.message_tokens)
    session.truncate(1)
    assert session.history_tokens == count_message_tokens(first)
