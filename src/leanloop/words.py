"""Numbers in words for people: a count with its noun in the right number ("1 repository",
"2 repositories"), a count out of a total ("3 of 10"), and a rate as a percentage."""

from __future__ import annotations

#: Nouns whose plural the spelling rules below do not give.
_IRREGULAR = {
    "sorry": "sorries",
    "axis": "axes",
    "index": "indices",
    "child": "children",
    "epoch": "epochs",
}


def plural_of(noun: str) -> str:
    """The plural of an English noun (regular spelling rules, a few irregular ones)."""
    if noun in _IRREGULAR:
        return _IRREGULAR[noun]
    if noun.endswith("y") and len(noun) > 1 and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def plural(count: int | float, noun: str, many: str | None = None) -> str:
    """``count`` with ``noun`` in the number it needs: ``plural(1, "theorem")`` is
    "1 theorem", ``plural(2, "repository")`` "2 repositories" (``many`` gives an irregular
    plural). A float count is written as an integer when it is one."""
    shown = int(count) if float(count).is_integer() else count
    word = noun if shown == 1 else (many or plural_of(noun))
    return f"{shown} {word}"


def percent(rate: float, digits: int = 1) -> str:
    """A rate (a fraction between 0 and 1) as a percentage: ``percent(0.25)`` is "25.0 %"."""
    return f"{100 * rate:.{digits}f} %"


def count_of(part: int, total: int, noun: str | None = None) -> str:
    """``part`` out of ``total`` as counts: "3 of 10", or with a noun "3 of 10 theorems"
    ("1 of 1 theorem")."""
    if noun is None:
        return f"{part} of {total}"
    return f"{part} of {plural(total, noun)}"


def share(part: int, total: int, noun: str | None = None) -> str:
    """A count out of a total and its rate: "3 of 10 (30 %)"; no rate when the total is 0."""
    text = count_of(part, total, noun)
    if not total:
        return text
    return f"{text} ({percent(part / total, 0)})"
