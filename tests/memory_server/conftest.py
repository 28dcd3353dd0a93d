"""Shared fixtures: a small workspace with an artifact manifest, derived files and notes."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_server.embedding import Embedder, set_torch_threads

MANIFEST = """\
artifacts:
  - id: chart_3f9a1c20
    title: "Median rent by city, 2015–2023"
    modality: chart
    files: [artifacts/chart_3f9a1c20.png, derived/chart_3f9a1c20.table.csv]
    aliases: ["rent chart", "chart A"]
  - id: invoice_2023_0042
    title: "Invoice INV-2023-0042 from Nordlicht GmbH"
    modality: document
    files: [artifacts/invoice_2023_0042.json]
"""

TABLE = """\
city,year,median_rent_eur
Berlin,2019,1830
Berlin,2023,2110
Munich,2019,2240
Hamburg,2019,1675
"""

INVOICE = """\
{"invoice_number": "INV-2023-0042", "vendor": "Nordlicht GmbH",
 "total_eur": 4812.5, "due_date": "2023-11-30",
 "lines": [{"item": "solar inverter", "qty": 2, "price_eur": 1999.0},
           {"item": "installation", "qty": 1, "price_eur": 814.5}]}
"""

NOTE = """\
# 2026-01-03

## Rent
- chart_3f9a1c20 shows Berlin at 1830 EUR in 2019.

## Travel
- The user prefers window seats on trains to Hamburg.
"""

MEMORY = """\
# Long-term memory

- The user's cat is called Miso.
- Invoices go to accounting@example.org.
"""

SCRIPT = """\
def monthly_payment(principal: float, rate: float, months: int) -> float:
    r = rate / 12
    return principal * r / (1 - (1 + r) ** -months)


class Ledger:
    def __init__(self) -> None:
        self.entries = []
"""


def write_workspace(root: Path) -> Path:
    files = {
        "MANIFEST.yaml": MANIFEST,
        "artifacts/chart_3f9a1c20.png": "not really a png",
        "derived/chart_3f9a1c20.table.csv": TABLE,
        "artifacts/invoice_2023_0042.json": INVOICE,
        "memory/2026-01-03.md": NOTE,
        "MEMORY.md": MEMORY,
        "code/loan_calc.py": SCRIPT,
        "notes/meeting_minutes.txt": (
            "Project Falcon kickoff on 2025-03-14.\n\n"
            "Budget approved: 125,000 EUR. Owner: Dana Whitfield.\n"
        ),
    }
    for relative, content in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    return root


@pytest.fixture
def workspace_dir(tmp_path: Path) -> Path:
    return write_workspace(tmp_path / "ws")


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """One MiniLM for the whole session (the model itself is cached per process)."""
    set_torch_threads(1)  # the suite shares a small CPU with other processes
    shared = Embedder()
    shared.embed(["warm up"])
    return shared


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Workspaces of these tests share one embedding cache, so identical texts are embedded
    once per session (tests that count embeddings use a private cache)."""
    return tmp_path_factory.mktemp("embedding-cache") / "embeddings.sqlite"
