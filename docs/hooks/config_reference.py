"""MkDocs hook: the configuration reference, generated from defaults.yaml at build time.

docs/configuration.md holds the marker ``<!-- config-reference -->``. This hook replaces it
with one table row per setting of ``src/seedvar/profiles/defaults.yaml``: the dotted key, the
default as written there, and the comment on its line (with the indented comment lines that
continue it). The settings are thus described in one place, defaults.yaml, never twice.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

MARKER = "<!-- config-reference -->"
DEFAULTS = Path("src/seedvar/profiles/defaults.yaml")  # relative to mkdocs.yml
_KEY = re.compile(r"^(?P<indent> *)(?P<key>\w+):(?P<value>.*?)(?:\s+#\s?(?P<note>.*))?$")
_MORE = re.compile(r"^ +#\s?(?P<note>.*)$")  # an indented comment line continues the row above


def _default(raw: str, value: Any) -> str:
    """The default as a table cell: the text of defaults.yaml, long lists shortened."""
    if isinstance(value, list) and len(value) > 6:
        return f"`[{value[0]}, {value[1]}, ..., {value[-1]}]` ({len(value)} items)"
    return f"`{raw}`" if raw else ""


def reference(path: Path) -> str:
    """The Markdown table of every setting in the defaults file at ``path``."""
    text = path.read_text(encoding="utf-8")
    tree = yaml.safe_load(text)
    rows: list[list[str]] = []
    stack: list[tuple[int, str]] = []
    after_row = False
    for line in text.splitlines():
        more = _MORE.match(line)
        if more and after_row:
            rows[-1][2] = f"{rows[-1][2]} {more['note'].strip()}".strip()
            continue
        after_row = False
        match = _KEY.match(line)
        if not match:
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        keys = [key for _, key in stack] + [match["key"]]
        value: Any = tree
        for key in keys:
            value = value[key]
        raw = match["value"].strip()
        if raw.startswith("&"):  # a YAML anchor: the mapping follows on the next lines
            raw = ""
        if isinstance(value, dict) and not raw:
            stack.append((indent, match["key"]))
            if not match["note"]:
                continue
        rows.append([f"`{'.'.join(keys)}`", _default(raw, value), (match["note"] or "").strip()])
        after_row = True
    lines = ["| key | default | note |", "|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def on_page_markdown(markdown: str, *, config: Any, **_: Any) -> str:
    """Replace the marker, where a page has it, with the table made from defaults.yaml."""
    if MARKER not in markdown:
        return markdown
    root = Path(config["config_file_path"]).parent
    return markdown.replace(MARKER, reference(root / DEFAULTS))
