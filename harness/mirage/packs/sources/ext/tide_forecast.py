"""Harmonic tide forecasts for the Gull Point harbour gauge.

Predicts water height from a small set of tidal constituents fitted to the gauge record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

__version__ = "2.4.1"

DEFAULT_STATION = "Gull Point"
DATUM_OFFSET_M = 2.37
CACHE_TTL_SECONDS = 900
KNOT_IN_MS = 0.514444

# constituent name -> (amplitude in metres, period in hours, phase in degrees)
CONSTITUENTS = {
    "M2": (1.62, 12.42, 114.0),
    "S2": (0.54, 12.0, 151.0),
    "K1": (0.31, 23.93, 202.0),
    "O1": (0.22, 25.82, 188.0),
}

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class TidePoint:
    when: datetime
    height_m: float


def knots_to_ms(knots: float) -> float:
    """Convert a current speed from knots to metres per second."""
    return knots * KNOT_IN_MS


def hours_since_epoch(when: datetime) -> float:
    """Hours between the fitting epoch and ``when`` (timezone-aware)."""
    return (when - EPOCH).total_seconds() / 3600.0


class TideForecaster:
    """Sum-of-cosines tide model for one station."""

    def __init__(self, station: str = DEFAULT_STATION, datum_offset_m: float = DATUM_OFFSET_M):
        self.station = station
        self.datum_offset_m = datum_offset_m

    def height_at(self, when: datetime) -> float:
        """Predicted water height above chart datum, in metres."""
        hours = hours_since_epoch(when)
        total = self.datum_offset_m
        for amplitude, period, phase in CONSTITUENTS.values():
            total += amplitude * math.cos(2 * math.pi * hours / period - math.radians(phase))
        return total

    def forecast(
        self, start: datetime, horizon_hours: int = 72, step_minutes: int = 15
    ) -> list[TidePoint]:
        """Heights from ``start`` every ``step_minutes`` for ``horizon_hours``."""
        steps = horizon_hours * 60 // step_minutes
        return [
            TidePoint(when, self.height_at(when))
            for when in (
                start.fromtimestamp(start.timestamp() + i * step_minutes * 60, start.tzinfo)
                for i in range(steps + 1)
            )
        ]

    def next_high_water(self, start: datetime, search_hours: int = 14) -> TidePoint:
        """The highest predicted point in the next ``search_hours`` hours."""
        return max(
            self.forecast(start, horizon_hours=search_hours, step_minutes=5),
            key=lambda point: point.height_m,
        )
