"""Why a decision or a note came out as it did, as data: the rule and its numbers (the words
are the report's, in seedvar.report.wording)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reason:
    """The rule that decided and its numbers."""

    rule: str
    numbers: dict[str, Any]
