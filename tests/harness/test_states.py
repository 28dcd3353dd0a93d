from __future__ import annotations

from pathlib import Path

import pytest

from harness.mirage.trunk.runner import TrunkError, check_states_reachable, compaction_config
from harness.mirage.trunk.states import depth_profile, paper_profile, scaled_profile


def test_paper_and_scaled_coordinates() -> None:
    paper = paper_profile()
    assert [(s.name, s.eit) for s in paper.states] == [
        ("S1-d0", None),
        ("S1-d50k", 50_000),
        ("S1-d80k", 80_000),
        ("S2", None),
    ]
    scaled = scaled_profile(8192)
    assert [s.eit for s in scaled.states] == [None, 3413, 5461, None]


def test_scaled_compaction_lands_where_the_paper_did() -> None:
    paper = compaction_config(paper_profile(), "verbatim", "m", True).budget(120_000)
    scaled = compaction_config(scaled_profile(8192), "verbatim", "m", True).budget(8192)
    assert paper.threshold == 100_000
    assert scaled.threshold == round(8192 * 100_000 / 120_000)
    check_states_reachable(scaled_profile(8192), scaled.threshold)
    with pytest.raises(TrunkError, match="compaction threshold"):
        check_states_reachable(scaled_profile(8192), 4096)


def test_user_defined_profile_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\nwindow: 8192\nstates:\n"
        "  - {name: early, kind: plant_end}\n"
        "  - {name: deep, kind: depth, eit: 6000}\n"
        "  - {name: after-2, kind: compaction, compactions: 2}\n"
    )
    profile = depth_profile(str(path), 4096)
    assert [s.name for s in profile.states] == ["early", "deep", "after-2"]
    assert profile.state("after-2").compactions == 2
    path.write_text("name: bad\nwindow: 8192\nstates:\n  - {name: deep, kind: depth}\n")
    with pytest.raises(ValueError, match="needs 'eit'"):
        depth_profile(str(path), 4096)
    with pytest.raises(ValueError, match="unknown depth profile"):
        depth_profile("nope", 4096)
