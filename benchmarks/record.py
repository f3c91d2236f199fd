"""Recording a benchmark's results: replace (or append) the script's own section of a markdown file."""

from __future__ import annotations

from pathlib import Path


def write_section(path: Path, section: str, begin: str, end: str) -> None:
    """Write `section` (which starts with the marker line `begin` and ends with `end`) into `path`,
    in place of the text between the two markers if they are there, else at the end."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if begin in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1] if end in rest else ""
        text = head + section + tail.lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")
