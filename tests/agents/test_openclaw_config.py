"""OpenClaw's generated config, the user's merged over it, and the run options around it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.kit.agents.openclaw.config import (
    ANSWER_MODEL,
    HOUSEKEEPING_MODEL,
    TRUNK_MODEL,
    ConfigIssue,
    GatewaySettings,
    OpenClawConfigError,
    config_digest,
    generate_config,
    load_user_config,
    merge_config,
    rejection_message,
    scaled_budget,
)
from harness.kit.agents.openclaw.timeouts import ModelTimeouts
from harness.mirage.config import RunConfig
from harness.mirage.trunk.states import PAPER_WINDOW


def settings(window: int = 16_384) -> GatewaySettings:
    return GatewaySettings(
        gateway_port=18789,
        token="x" * 32,
        model_base_url="http://127.0.0.1:5000/v1",
        memory_url="http://127.0.0.1:5001/mcp",
        workspace=Path("/tmp/ws"),
        log_file=Path("/tmp/gw.log"),
        window=window,
        budget_window=PAPER_WINDOW,
        answer_max_tokens=64,
        housekeeping_max_tokens=512,
        timeouts=ModelTimeouts(call_s=1900, turn_s=7600),
    )


def test_routing_is_by_model_name_trunk_answer_housekeeping() -> None:
    config = generate_config(settings())
    defaults = config["agents"]["defaults"]
    assert defaults["model"]["primary"] == f"mirage/{TRUNK_MODEL}"
    assert defaults["compaction"]["model"] == f"mirage/{HOUSEKEEPING_MODEL}"
    assert defaults["compaction"]["memoryFlush"]["model"] == f"mirage/{HOUSEKEEPING_MODEL}"
    provider = config["models"]["providers"]["mirage"]
    assert provider["baseUrl"] == "http://127.0.0.1:5000/v1"
    models = {m["id"]: m for m in provider["models"]}
    assert set(models) == {TRUNK_MODEL, ANSWER_MODEL, HOUSEKEEPING_MODEL}
    assert {m["contextWindow"] for m in models.values()} == {16_384}
    assert models[HOUSEKEEPING_MODEL]["maxTokens"] == 512
    assert config["mcp"]["servers"]["mirage"]["url"] == "http://127.0.0.1:5001/mcp"
    assert config["memory"]["search"]["sources"] == ["memory"]


def test_budgets_scale_with_the_window_like_the_scaled_profile() -> None:
    small = generate_config(settings(12_000))["agents"]["defaults"]["compaction"]
    assert small["keepRecentTokens"] == 2_000  # 20 000 × 12k / 120k
    assert small["memoryFlush"]["softThresholdTokens"] == 400
    assert scaled_budget(4_000, 240_000, PAPER_WINDOW) == 4_000  # never above OpenClaw's default


def test_the_users_settings_merge_key_by_key(tmp_path: Path) -> None:
    mine = tmp_path / "mine.json5"
    mine.write_text("{agents: {defaults: {compaction: {keepRecentTokens: 999}}}, // mine\n}")
    merged = merge_config(generate_config(settings()), load_user_config(mine))
    compaction = merged["agents"]["defaults"]["compaction"]
    assert compaction["keepRecentTokens"] == 999
    assert compaction["model"] == f"mirage/{HOUSEKEEPING_MODEL}"  # siblings kept
    assert config_digest(load_user_config(mine)) != config_digest(None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{gateway: {port: 1}}", "gateway.port is set by mirage run"),
        ("[1, 2]", "the top level must be an object"),
        ("{oops", "not JSON5"),
    ],
)
def test_an_unusable_user_config_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    mine = tmp_path / "mine.json5"
    mine.write_text(text)
    with pytest.raises(OpenClawConfigError, match=expected) as caught:
        load_user_config(mine)
    assert "\n" not in str(caught.value) and str(mine) in str(caught.value)


def test_a_missing_user_config_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(OpenClawConfigError, match="cannot read"):
        load_user_config(tmp_path / "absent.json5")


def test_a_rejection_lists_the_first_issues() -> None:
    issues = [ConfigIssue(path=f"k{i}", message="Unrecognized key") for i in range(7)]
    message = rejection_message(issues, Path("mine.json5"), "2026.9.6")
    assert message.startswith("OpenClaw 2026.9.6 rejects --openclaw-config mine.json5: k0:")
    assert "(and 2 more)" in message


def test_run_options_for_openclaw(tmp_path: Path) -> None:
    assert RunConfig(agent="openclaw").agent == "openclaw"
    with pytest.raises(ValidationError, match="applies only with --agent openclaw"):
        RunConfig(openclaw_config=tmp_path / "x.json5")
    with pytest.raises(ValidationError, match="one probe at a time"):
        RunConfig(agent="openclaw", concurrency=2)
    bad = tmp_path / "bad.json5"
    bad.write_text("{models: {mode: 'merge'}}")
    with pytest.raises(ValidationError, match=r"models\.mode is set by mirage run"):
        RunConfig(agent="openclaw", openclaw_config=bad)
