"""Renderers for the extension evidence types: a photo-like scene, an infographic, a code
file (facts extracted with ``ast``), an email (.eml), an invoice PDF and a report PDF. Each
returns the text representation written next to the original."""

from __future__ import annotations

import ast
from datetime import date, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

from harness.kit.packfiles import pil_font, save_pil_png
from harness.mirage.packs.build.render import figure_style, new_figure, save_pdf

# --- photo-like scene -------------------------------------------------------------------------


def render_bakery_photo(data: dict[str, Any], path: Path) -> None:
    from PIL import Image, ImageDraw, ImageFilter

    image = Image.new("RGB", (720, 540), (168, 200, 230))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 430, 720, 540), fill=(120, 118, 112))
    draw.rectangle((0, 410, 720, 432), fill=(190, 186, 176))
    draw.rectangle((90, 40, 630, 412), fill=(214, 170, 120))
    for index in range(data["upstairs_windows"]):
        x = 130 + index * 165
        draw.rectangle((x, 70, x + 110, 160), fill=(235, 240, 245), outline=(90, 70, 50), width=5)
        draw.line((x + 55, 70, x + 55, 160), fill=(90, 70, 50), width=3)
    for stripe in range(12):
        colour = (200, 40, 40) if stripe % 2 == 0 else (245, 245, 240)
        draw.polygon(
            [
                (90 + stripe * 45, 200),
                (135 + stripe * 45, 200),
                (140 + stripe * 45, 240),
                (95 + stripe * 45, 240),
            ],
            fill=colour,
        )
    draw.rectangle((150, 170, 570, 200), fill=(40, 40, 44))
    draw.text(
        (360, 185),
        data["shop_name"],
        font=pil_font(22, bold=True),
        fill=(250, 215, 90),
        anchor="mm",
    )
    draw.rectangle((120, 260, 330, 400), fill=(200, 225, 235), outline=(60, 50, 40), width=4)
    draw.rectangle((400, 250, 480, 410), fill=(40, 120, 60), outline=(30, 40, 30), width=3)
    draw.ellipse((465, 330, 473, 338), fill=(220, 190, 80))
    draw.text(
        (440, 235),
        str(data["street_number"]),
        font=pil_font(18, bold=True),
        fill=(30, 30, 30),
        anchor="mm",
    )
    hours = data["opening_hours"]
    draw.rectangle((410, 268, 470, 300), fill=(250, 250, 245))
    draw.text((440, 277), "OPEN", font=pil_font(9, bold=True), fill=(30, 30, 30), anchor="mm")
    draw.text(
        (440, 291),
        f"{hours['open']}–{hours['close']}",
        font=pil_font(9),
        fill=(30, 30, 30),
        anchor="mm",
    )
    _chalkboard(draw, data["chalkboard"])
    draw.rectangle((640, 300, 706, 328), fill=(30, 90, 60))
    draw.text(
        (673, 314), data["street_name"], font=pil_font(10, bold=True), fill="white", anchor="mm"
    )
    draw.line((673, 328, 673, 430), fill=(60, 60, 60), width=4)
    _bicycle(draw, (0, 70, 200))
    image = image.filter(ImageFilter.GaussianBlur(0.6))
    save_pil_png(image, path)


def _chalkboard(draw: Any, items: list[dict[str, Any]]) -> None:
    draw.rectangle((520, 300, 626, 420), fill=(35, 45, 40), outline=(120, 90, 60), width=4)
    draw.text((573, 314), "TODAY", font=pil_font(11, bold=True), fill="white", anchor="mm")
    for index, entry in enumerate(items):
        y = 334 + index * 28
        draw.text((527, y), entry["item"], font=pil_font(9), fill="white")
        draw.text(
            (619, y + 12),
            f"£{entry['price_gbp']:.2f}",
            font=pil_font(10, bold=True),
            fill=(250, 230, 120),
            anchor="ra",
        )


def _bicycle(draw: Any, colour: tuple[int, int, int]) -> None:
    for centre in (170, 270):
        draw.ellipse((centre - 38, 400, centre + 38, 476), outline=(20, 20, 20), width=5)
    draw.line((170, 438, 215, 405, 270, 438, 230, 438, 170, 438), fill=colour, width=6)
    draw.line((215, 405, 205, 388), fill=colour, width=5)
    draw.line((255, 395, 270, 438), fill=colour, width=5)


def bakery_description(artifact_id: str, title: str, data: dict[str, Any]) -> str:
    hours = data["opening_hours"]
    board = "; ".join(f"{e['item']} £{e['price_gbp']:.2f}" for e in data["chalkboard"])
    return (
        f"# {title}\n\n- Artifact: {artifact_id}\n"
        f"- Daytime street photo of a brick shopfront. The black sign reads "
        f'"{data["shop_name"]}" under a {data["awning"]} awning.\n'
        f"- The {data['door_colour']} front door shows the number {data['street_number']} above "
        f'it and an "OPEN {hours["open"]}–{hours["close"]}" card.\n'
        f"- The upper floor has {data['upstairs_windows']} windows.\n"
        f"- A chalkboard headed TODAY lists: {board}.\n"
        f'- A green street sign on a post reads "{data["street_name"]}".\n'
        f"- A {data['bicycle_colour']} bicycle stands in front of the shop window.\n"
    )


# --- infographic ------------------------------------------------------------------------------


def render_sleep_infographic(data: dict[str, Any], path: Path) -> None:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (640, 900), (22, 34, 64))
    draw = ImageDraw.Draw(image)
    survey, head = data["survey"], data["headline"]
    draw.text(
        (320, 50), "HOW LAKESHORE SLEEPS", font=pil_font(34, bold=True), fill="white", anchor="mm"
    )
    draw.text((320, 92), survey["name"], font=pil_font(15), fill=(180, 200, 240), anchor="mm")
    tiles = [
        (f"{head['weeknight_sleep_h']} h", "average weeknight sleep"),
        (f"{head['weekend_sleep_h']} h", "average weekend sleep"),
        (f"{head['under_six_hours_pct']}%", "sleep under six hours"),
        (f"{head['caffeine_after_six_pct']}%", "have caffeine after 6 pm"),
    ]
    for index, (value, label) in enumerate(tiles):
        x, y = 40 + (index % 2) * 290, 130 + (index // 2) * 160
        draw.rounded_rectangle((x, y, x + 270, y + 140), radius=18, fill=(45, 70, 120))
        draw.text(
            (x + 135, y + 58), value, font=pil_font(44, bold=True), fill=(255, 200, 90), anchor="mm"
        )
        draw.text((x + 135, y + 112), label, font=pil_font(16), fill="white", anchor="mm")
    draw.text((40, 470), "What keeps students awake", font=pil_font(22, bold=True), fill="white")
    for index, entry in enumerate(data["disruptors"]):
        y = 515 + index * 62
        draw.text((40, y), entry["cause"], font=pil_font(16), fill="white")
        width = int(4.6 * entry["pct"])
        draw.rounded_rectangle((40, y + 24, 40 + width, y + 48), radius=8, fill=(255, 140, 90))
        draw.text(
            (50 + width, y + 36),
            f"{entry['pct']}%",
            font=pil_font(16, bold=True),
            fill="white",
            anchor="lm",
        )
    draw.text(
        (320, 790), f"Tip: {data['tip']}", font=pil_font(14), fill=(200, 220, 255), anchor="mm"
    )
    footer = f"Fieldwork {survey['fieldwork']} · {survey['respondents']:,} respondents"
    draw.text((320, 860), footer, font=pil_font(14), fill=(150, 170, 210), anchor="mm")
    save_pil_png(image, path)


def infographic_description(artifact_id: str, title: str, data: dict[str, Any]) -> str:
    survey, head = data["survey"], data["headline"]
    causes = "\n".join(
        f"  {i}. {e['cause']}: {e['pct']}%" for i, e in enumerate(data["disruptors"], start=1)
    )
    return (
        f"# {title}\n\n- Artifact: {artifact_id}\n"
        f'- Poster headed "HOW LAKESHORE SLEEPS", from the {survey["name"]}.\n'
        f"- Tiles: average weeknight sleep {head['weeknight_sleep_h']} h; average weekend sleep "
        f"{head['weekend_sleep_h']} h; {head['under_six_hours_pct']}% sleep under six hours; "
        f"{head['caffeine_after_six_pct']}% have caffeine after 6 pm.\n"
        f'- Bar list "What keeps students awake" (top to bottom):\n{causes}\n'
        f"- Tip: {data['tip']}\n"
        f"- Footer: fieldwork {survey['fieldwork']}, {survey['respondents']} respondents.\n"
    )


# --- code file --------------------------------------------------------------------------------


def code_facts(source: str, filename: str) -> dict[str, Any]:
    """Module docstring, literal constants, the CONSTITUENTS table and every function's
    default arguments, read from the code with ``ast``."""
    tree = ast.parse(source)
    constants: dict[str, Any] = {}
    constituents: list[dict[str, Any]] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if isinstance(node.value, ast.Constant):
                constants[name] = node.value.value
            elif name == "CONSTITUENTS":
                for key, value in ast.literal_eval(node.value).items():
                    amplitude, period, phase = value
                    constituents.append(
                        {
                            "name": key,
                            "amplitude_m": amplitude,
                            "period_h": period,
                            "phase_deg": phase,
                        }
                    )
    return {
        "file": filename,
        "docstring": (ast.get_docstring(tree) or "").splitlines()[0],
        "constants": constants,
        "constituents": constituents,
        "defaults": _function_defaults(tree),
    }


def _function_defaults(tree: ast.Module) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    found[f"{node.name}.{item.name}"] = _defaults_of(item)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = _defaults_of(node)
    return found


def _defaults_of(function: ast.FunctionDef) -> dict[str, Any]:
    args = function.args.args[len(function.args.args) - len(function.args.defaults) :]
    return {
        arg.arg: default.value if isinstance(default, ast.Constant) else ast.unparse(default)
        for arg, default in zip(args, function.args.defaults, strict=True)
    }


def code_outline(artifact_id: str, title: str, facts: dict[str, Any]) -> str:
    lines = [
        f"# {title}",
        "",
        f"- Artifact: {artifact_id}",
        f"- File: {facts['file']}",
        f"- Docstring: {facts['docstring']}",
        "- Constants:",
    ]
    lines += [f"  - {name} = {value!r}" for name, value in facts["constants"].items()]
    lines.append("- CONSTITUENTS (amplitude m, period h, phase deg):")
    lines += [
        f"  - {c['name']}: {c['amplitude_m']}, {c['period_h']}, {c['phase_deg']}"
        for c in facts["constituents"]
    ]
    lines.append("- Functions and default arguments:")
    lines += [
        f"  - {name}({', '.join(f'{k}={v!r}' for k, v in defaults.items())})"
        for name, defaults in facts["defaults"].items()
    ]
    return "\n".join(lines) + "\n"


# --- email ------------------------------------------------------------------------------------


def email_body(data: dict[str, Any]) -> str:
    concert = date.fromisoformat(data["concert_date"])
    due = date.fromisoformat(data["deposit_due"])
    tickets = data["tickets"]
    return (
        "Hi,\n\n"
        f"Good news: {data['venue']} is booked for our spring concert on "
        f"{concert.strftime('%A')} {concert.day} {concert.strftime('%B %Y')}. Doors open at "
        f"{data['doors_open']} and we start singing at {data['start_time']}. The hall seats "
        f"{data['capacity']}.\n\n"
        f"The hall needs a deposit of £{data['deposit_gbp']}, to be paid by "
        f"{due.day} {due.strftime('%B %Y')}. Could you arrange that from the choir account?\n\n"
        f"We have {data['rehearsal_room']} for warming up from 17:45. Tickets will be "
        f"£{tickets['adult_gbp']} for adults and £{tickets['student_gbp']} for students.\n\n"
        f"Thanks so much,\n{data['from_name']}\n"
    )


def email_message(data: dict[str, Any]) -> bytes:
    message = EmailMessage()
    message["From"] = f"{data['from_name']} <{data['from_address']}>"
    message["To"] = data["to_address"]
    message["Subject"] = data["subject"]
    message["Date"] = format_datetime(datetime.fromisoformat(data["sent"]))
    message["Message-ID"] = f"<{data['sent_date']}.venue@copperfield-choir.org>"
    message.set_content(email_body(data), cte="8bit")
    return bytes(message)


def email_text(artifact_id: str, data: dict[str, Any]) -> str:
    sent = datetime.fromisoformat(data["sent"])
    return (
        f"Artifact: {artifact_id}\nFrom: {data['from_name']} <{data['from_address']}>\n"
        f"To: {data['to_address']}\nDate: {format_datetime(sent)}\n"
        f"Subject: {data['subject']}\n\n{email_body(data)}"
    )


# --- PDFs -------------------------------------------------------------------------------------


def _page() -> Any:
    figure = new_figure(8.27, 11.69)
    figure.patch.set_facecolor("white")
    return figure


def invoice_lines(data: dict[str, Any]) -> list[str]:
    lines = [
        data["vendor"],
        data["vendor_address"],
        "",
        f"INVOICE {data['invoice_number']}",
        f"Issue date: {data['issued']}    Due date: {data['due']}",
        f"Bill to: {data['bill_to']}",
        "",
        "Item | Qty | Unit price (GBP) | Line total (GBP)",
    ]
    lines += [
        f"{line['item']} | {line['qty']} | {line['unit_gbp']:.2f} | {line['total_gbp']:.2f}"
        for line in data["lines"]
    ]
    lines += [
        "",
        f"Subtotal: £{data['subtotal_gbp']:.2f}",
        f"VAT ({data['vat_rate_pct']}%): £{data['vat_gbp']:.2f}",
        f"Total due: £{data['total_gbp']:.2f}",
    ]
    return lines


def render_invoice_pdf(data: dict[str, Any], path: Path) -> None:
    with figure_style():
        figure = _page()
        figure.text(0.08, 0.94, data["vendor"], fontsize=18, fontweight="bold")
        figure.text(0.08, 0.915, data["vendor_address"], fontsize=10, color="#555555")
        figure.text(0.92, 0.94, "INVOICE", fontsize=22, fontweight="bold", ha="right")
        meta = [
            f"Invoice no: {data['invoice_number']}",
            f"Issue date: {data['issued']}",
            f"Due date: {data['due']}",
        ]
        for index, text in enumerate(meta):
            figure.text(0.92, 0.9 - index * 0.02, text, fontsize=10, ha="right")
        figure.text(0.08, 0.84, f"Bill to: {data['bill_to']}", fontsize=11)
        axes = figure.add_axes((0.08, 0.55, 0.84, 0.25))
        axes.axis("off")
        rows = [
            [line["item"], str(line["qty"]), f"{line['unit_gbp']:.2f}", f"{line['total_gbp']:.2f}"]
            for line in data["lines"]
        ]
        table = axes.table(
            cellText=rows,
            colLabels=["Item", "Qty", "Unit price (GBP)", "Line total (GBP)"],
            colWidths=[0.52, 0.1, 0.19, 0.19],
            loc="upper center",
        )
        table.auto_set_font_size(False)
        table.set_fontsize(10)
        table.scale(1, 1.6)
        totals = [
            f"Subtotal: £{data['subtotal_gbp']:.2f}",
            f"VAT ({data['vat_rate_pct']}%): £{data['vat_gbp']:.2f}",
            f"Total due: £{data['total_gbp']:.2f}",
        ]
        for index, text in enumerate(totals):
            figure.text(
                0.92,
                0.5 - index * 0.025,
                text,
                fontsize=11,
                ha="right",
                fontweight="bold" if index == 2 else "normal",
            )
        save_pdf([figure], path)


def report_lines(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(page, text) pairs: the report's paragraphs, table rows and footer, in reading order."""
    published = date.fromisoformat(data["published"])
    meeting = date.fromisoformat(data["next_meeting"])
    return [
        ("1", f"{data['organisation']}: quarterly report, {data['period']}"),
        (
            "1",
            f"Prepared by {data['author']}, published {published.day} "
            f"{published.strftime('%B %Y')}.",
        ),
        (
            "1",
            "A warm, dry late summer gave a good flow from the lime trees and clover. The "
            "table below gives hives, honey taken and colonies lost at each apiary.",
        ),
        ("1", "Apiary | Hives | Honey (kg) | Colonies lost"),
        *(
            ("1", f"{a['apiary']} | {a['hives']} | {a['honey_kg']} | {a['colonies_lost']}")
            for a in data["apiaries"]
        ),
        ("2", f"Honey is on sale to members at £{data['jar_price_gbp']:.2f} per jar."),
        ("2", f"Next members' meeting: {meeting.day} {meeting.strftime('%B %Y')}, village hall."),
    ]


def render_report_pdf(data: dict[str, Any], path: Path) -> None:
    lines = report_lines(data)
    with figure_style():
        first, second = _page(), _page()
        first.text(0.08, 0.94, lines[0][1], fontsize=15, fontweight="bold")
        first.text(0.08, 0.91, lines[1][1], fontsize=10, color="#555555")
        first.text(0.08, 0.86, lines[2][1], fontsize=10.5, wrap=True)
        axes = first.add_axes((0.08, 0.5, 0.84, 0.3))
        axes.axis("off")
        rows = [
            [a["apiary"], str(a["hives"]), str(a["honey_kg"]), str(a["colonies_lost"])]
            for a in data["apiaries"]
        ]
        table = axes.table(
            cellText=rows,
            colLabels=["Apiary", "Hives", "Honey (kg)", "Colonies lost"],
            colWidths=[0.34, 0.2, 0.23, 0.23],
            loc="upper center",
        )
        table.auto_set_font_size(False)
        table.set_fontsize(10.5)
        table.scale(1, 1.7)
        first.text(0.5, 0.03, "Page 1 of 2", fontsize=9, ha="center", color="#777777")
        for index, (_, text) in enumerate(lines[-2:]):
            second.text(0.08, 0.92 - index * 0.04, text, fontsize=11)
        second.text(0.5, 0.03, "Page 2 of 2", fontsize=9, ha="center", color="#777777")
        save_pdf([first, second], path)


def pdf_text(artifact_id: str, title: str, lines: list[str]) -> str:
    return f"Artifact: {artifact_id}\nTitle: {title}\n\n" + "\n".join(lines) + "\n"
