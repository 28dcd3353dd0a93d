"""UI views rendered with Pillow: a fitness-app profile and a phone lock screen with
notifications. Each view draws exactly the fields of its data JSON, and its summary (the text
stand-in for text-only models) is written from the same data."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from harness.kit.packfiles import pil_font, save_pil_png, wrap_text

WIDTH, HEIGHT = 540, 1000
ACCENT = (230, 92, 40)
INK = (30, 30, 36)
MUTED = (110, 110, 120)
CARD = (244, 244, 247)


def _pretty_date(iso: str, weekday: bool = False) -> str:
    day = date.fromisoformat(iso)
    text = f"{day.day} {day.strftime('%b')} {day.year}"
    return f"{day.strftime('%a')} {text}" if weekday else text


def _thousands(value: float) -> str:
    return f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"


def render_fitness_profile(data: dict[str, Any], path: Path) -> None:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    profile, stats = data["profile"], data["stats"]
    draw.rectangle((0, 0, WIDTH, 64), fill=ACCENT)
    draw.text((24, 16), data["app"], font=pil_font(26, bold=True), fill="white")
    draw.ellipse((24, 84, 124, 184), fill=(250, 205, 170))
    initials = "".join(part[0] for part in profile["display_name"].split())
    draw.text((74, 134), initials, font=pil_font(34, bold=True), fill=ACCENT, anchor="mm")
    draw.text((144, 92), profile["display_name"], font=pil_font(26, bold=True), fill=INK)
    draw.text((144, 128), profile["username"], font=pil_font(18), fill=MUTED)
    since = _pretty_date(profile["member_since"])
    draw.text(
        (144, 154), f"{profile['home']} · Member since {since}", font=pil_font(15), fill=MUTED
    )
    draw.rounded_rectangle((144, 180, 280, 206), radius=12, fill=(255, 215, 80))
    draw.text((212, 193), profile["level"], font=pil_font(14, bold=True), fill=INK, anchor="mm")
    _stat_grid(draw, stats, top=226)
    _weekly_goal(draw, data["weekly_goal"], top=466)
    _personal_bests(draw, data["personal_bests"], top=540)
    _recent(draw, data["recent"], top=650)
    save_pil_png(image, path)


def _stat_grid(draw: Any, stats: dict[str, Any], top: int) -> None:
    cells = [
        ("Workouts", _thousands(stats["workouts"])),
        ("Distance", f"{_thousands(stats['distance_km'])} km"),
        ("Active time", f"{stats['active_hours']} h"),
        ("Followers", _thousands(stats["followers"])),
        ("Following", _thousands(stats["following"])),
        ("Streak", f"{stats['streak_days']} days"),
        ("Elevation", f"{_thousands(stats['elevation_m'])} m"),
    ]
    for index, (label, value) in enumerate(cells):
        column, row = index % 3, index // 3
        x, y = 24 + column * 168, top + row * 76
        draw.rounded_rectangle((x, y, x + 156, y + 66), radius=10, fill=CARD)
        draw.text((x + 12, y + 8), label, font=pil_font(14), fill=MUTED)
        draw.text((x + 12, y + 30), value, font=pil_font(21, bold=True), fill=INK)


def _weekly_goal(draw: Any, goal: dict[str, int], top: int) -> None:
    text = f"This week: {goal['done']} of {goal['target']} workouts"
    draw.text((24, top), text, font=pil_font(17, bold=True), fill=INK)
    draw.rounded_rectangle((24, top + 30, 516, top + 46), radius=8, fill=(230, 230, 235))
    filled = 24 + int(492 * goal["done"] / goal["target"])
    draw.rounded_rectangle((24, top + 30, filled, top + 46), radius=8, fill=ACCENT)


def _personal_bests(draw: Any, bests: list[dict[str, str]], top: int) -> None:
    draw.text((24, top), "Personal bests", font=pil_font(19, bold=True), fill=INK)
    for index, best in enumerate(bests):
        x = 24 + index * 168
        draw.rounded_rectangle((x, top + 34, x + 156, top + 96), radius=10, fill=CARD)
        draw.text((x + 12, top + 42), best["event"], font=pil_font(14), fill=MUTED)
        draw.text((x + 12, top + 64), best["time"], font=pil_font(20, bold=True), fill=INK)


def _recent(draw: Any, activities: list[dict[str, Any]], top: int) -> None:
    draw.text((24, top), "Recent activities", font=pil_font(19, bold=True), fill=INK)
    for index, activity in enumerate(activities):
        y = top + 36 + index * 74
        draw.line((24, y, 516, y), fill=(225, 225, 230), width=1)
        draw.text((24, y + 10), activity["type"], font=pil_font(18, bold=True), fill=INK)
        when = _pretty_date(activity["date"], weekday=True)
        draw.text((516, y + 12), when, font=pil_font(14), fill=MUTED, anchor="ra")
        details = (
            f"{activity['distance_km']} km · {activity['duration']} · "
            f"↑ {activity['elevation_m']} m elevation"
        )
        draw.text((24, y + 40), details, font=pil_font(16), fill=INK)


def render_notifications(data: dict[str, Any], path: Path) -> None:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (WIDTH, HEIGHT), (28, 40, 68))
    draw = ImageDraw.Draw(image)
    screen = data["lock_screen"]
    draw.text((WIDTH // 2, 60), screen["date"], font=pil_font(20), fill="white", anchor="mm")
    draw.text(
        (WIDTH // 2, 118), screen["clock"], font=pil_font(72, bold=True), fill="white", anchor="mm"
    )
    y = 190
    for item in data["notifications"]:
        y = _notification_card(draw, item, y) + 10
    save_pil_png(image, path)


def _notification_card(draw: Any, item: dict[str, Any], top: int) -> int:
    body_font = pil_font(16)
    lines = wrap_text(draw, item["body"], body_font, WIDTH - 72)
    bottom = top + 62 + 22 * len(lines)
    draw.rounded_rectangle((16, top, WIDTH - 16, bottom), radius=16, fill=(236, 238, 244))
    draw.text((34, top + 10), item["app"].upper(), font=pil_font(13, bold=True), fill=MUTED)
    draw.text((WIDTH - 34, top + 10), item["age"], font=pil_font(13), fill=MUTED, anchor="ra")
    draw.text((34, top + 30), item["title"], font=pil_font(17, bold=True), fill=INK)
    for index, line in enumerate(lines):
        draw.text((34, top + 54 + 22 * index), line, font=body_font, fill=INK)
    return bottom


def fitness_summary(artifact_id: str, title: str, data: dict[str, Any]) -> str:
    profile, stats, goal = data["profile"], data["stats"], data["weekly_goal"]
    lines = [
        f"# {title}",
        "",
        f"- Artifact: {artifact_id}",
        f"- Screenshot of the {data['app']} app, profile screen.",
        f"- Name: {profile['display_name']} ({profile['username']}), {profile['home']}",
        f"- Member since: {_pretty_date(profile['member_since'])}; level badge: {profile['level']}",
        f"- Workouts {stats['workouts']}; distance {stats['distance_km']} km; active time "
        f"{stats['active_hours']} h; elevation {stats['elevation_m']} m",
        f"- Followers {stats['followers']}; following {stats['following']}; current streak "
        f"{stats['streak_days']} days",
        f"- This week: {goal['done']} of {goal['target']} workouts",
        "- Personal bests: "
        + "; ".join(f"{b['event']} {b['time']}" for b in data["personal_bests"]),
        "- Recent activities (top to bottom):",
    ]
    for activity in data["recent"]:
        lines.append(
            f"  - {_pretty_date(activity['date'], weekday=True)}: {activity['type']}, "
            f"{activity['distance_km']} km, {activity['duration']}, {activity['elevation_m']} m up"
        )
    return "\n".join(lines) + "\n"


def notifications_summary(artifact_id: str, title: str, data: dict[str, Any]) -> str:
    screen = data["lock_screen"]
    lines = [
        f"# {title}",
        "",
        f"- Artifact: {artifact_id}",
        f"- Phone lock screen showing {screen['clock']} on {screen['date']}.",
        f"- {len(data['notifications'])} notifications, newest first:",
    ]
    for index, item in enumerate(data["notifications"], start=1):
        lines.append(f"  {index}. {item['app']} ({item['age']}): {item['title']} | {item['body']}")
    return "\n".join(lines) + "\n"
