"""The configuration reference, generated from defaults.yaml and committed in
docs/configuration.md, so that a reader of the repository sees it too.

docs/configuration.md holds the table between the markers ``<!-- config-reference -->`` and
``<!-- /config-reference -->``: one row per setting of ``src/seedvar/profiles/defaults.yaml``,
the dotted key, the default as written there, and the comment on its line (with the indented
comment lines that continue it). The settings are thus described in one place, defaults.yaml.
``make docs`` (this file run as a script) writes the table; as an MkDocs hook it stops the
build when the committed table is not the one defaults.yaml gives.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

BEGIN, END = "<!-- config-reference -->", "<!-- /config-reference -->"
DEFAULTS = Path("src/seedvar/profiles/defaults.yaml")  # relative to the repository's root
PAGE = Path("docs/configuration.md")
_BLOCK = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.DOTALL)
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


def current(page: str, defaults: Path) -> str:
    """The page's text with the table between the markers made anew from `defaults`."""
    if not _BLOCK.search(page):
        raise ValueError(f"{PAGE} has no {BEGIN} ... {END} block")
    return _BLOCK.sub(lambda _: f"{BEGIN}\n{reference(defaults)}\n{END}", page)


def on_page_markdown(markdown: str, *, page: Any, config: Any, **_: Any) -> str:
    """Stop the build where the committed table is not what defaults.yaml gives."""
    if page.file.src_uri != PAGE.name:
        return markdown
    root = Path(config["config_file_path"]).parent
    if current(markdown, root / DEFAULTS) != markdown:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{PAGE}'s settings table is older than {DEFAULTS}; run `make docs`")
    return markdown


if __name__ == "__main__":
    PAGE.write_text(current(PAGE.read_text(encoding="utf-8"), DEFAULTS), encoding="utf-8")
    print(f"{PAGE}: the settings table written from {DEFAULTS}")
