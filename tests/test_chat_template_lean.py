"""The Lean XTML serializer (`lean/KimiK3/Training/ChatTemplate.lean`) evaluated on a dozen
conversations, against pybridge's (`pybridge/chat_template.py`), character for character.

One Lean run: the library's `ChatTemplateMedia` module bundled with its dependencies
(`codegen.bundle`), one `#eval!` per conversation printing, as code points, the Lean
`serialize`, the re-serialization of the Lean `parse` of it, `render` (generation prompt), and
`placeholderCount` and `conversationWF`. The conversations are written to Lean from the typed
messages, code point by code point. Two ill-formed conversations must be refused by both sides.
Planted bugs in the Python serializer (the newline after `<|end|>` left out, the user and
assistant tags swapped) must disagree with Lean.
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path

import pytest

from codegen.bundle import bundle, dependency_order, run_lean
from pybridge import chat_template as ct
from pybridge.chat_template import Argument, ChatTemplateError, Media, Message, Text, ToolCall

REPO = Path(__file__).resolve().parents[1]
MODULES = ("KimiK3.Training.ChatTemplateMedia",)


def conversations() -> list[list[Message]]:
    rng = random.Random(20)
    alphabet = "ab <>|\"=\n{}é中"

    def text() -> str:
        while True:
            s = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
            if "<|" not in s:
                return s

    out = [
        [],
        ct.from_dicts([{"role": "user", "content": "Hi"}]),
        ct.from_dicts([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
                       {"role": "assistant", "content": "4"}]),
        ct.from_dicts([{"role": "user", "content": [{"type": "text", "text": "Look: "}, {"type": "image"},
                                                    {"type": "video"}, {"type": "text", "text": "a<b>c"}]}]),
        ct.from_dicts([{"role": "assistant", "content": "ok",
                        "tool_calls": [{"name": "lookup", "arguments": {"q": "cat", "n": 3, "f": [1.5, None]}},
                                       {"name": "noop", "arguments": {}}]},
                       {"role": "tool", "content": '{"ok":true}'}]),
        [Message("user", (Media("image"),)), Message("assistant", (), (ToolCall("f.g", (Argument("x", "string", ""),)),))],
        ct.from_dicts([{"role": "user", "content": "line1\nline2 \"quoted\" | pipe < lt"}]),
    ]
    for _ in range(5):
        ms = []
        for _ in range(rng.randint(1, 3)):
            role = rng.choice(ct.ROLES)
            parts: list[Text | Media] = []
            for _ in range(rng.randint(0, 3)):
                parts.append(Media(rng.choice(ct.MEDIA_KINDS)) if parts and isinstance(parts[-1], Text)
                             or rng.random() < 0.3 else Text(text()))
            calls = (tuple(ToolCall(rng.choice(["a", "run_b", "c.d"]),
                                    tuple(Argument(rng.choice("xyz"), "string", text()) for _ in range(rng.randint(0, 2))))
                           for _ in range(rng.randint(0, 2))) if role == "assistant" else ())
            ms.append(Message(role, tuple(parts), tuple(calls)))
        out.append(ms)
    return out


#: ill-formed: text holding `<|`; a tool call on a user message (refused by both)
ILL_FORMED = [[Message("user", (Text("a<|b"),))],
              [Message("user", (Text("x"),), (ToolCall("f", ()),))]]


def lean_text(s: str) -> str:
    return f"(chars {[ord(c) for c in s]})"


def lean_message(m: Message) -> str:
    parts = ", ".join(f".text {lean_text(p.text)}" if isinstance(p, Text) else f".media .{p.kind}" for p in m.content)
    calls = ", ".join(
        "{ name := " + lean_text(c.name) + ", arguments := [" + ", ".join(
            "{ name := " + lean_text(a.name) + f", kind := .{a.kind}, value := " + lean_text(a.value) + " }"
            for a in c.arguments) + "] }" for c in m.tool_calls)
    return f"{{ role := .{m.role}, content := [{parts}], calls := [{calls}] }}"


def lean_source() -> str:
    lines = ["open KimiK3.Training.ChatTemplate",
             "def chars : List Nat → Text\n  | [] => []\n  | n :: r => Char.ofNat n :: chars r",
             "def codes : Text → List Nat\n  | [] => []\n  | c :: r => c.toNat :: codes r",
             "def reparsed (s : Text) : List Nat := match parse s with\n  | some ms => codes (serialize ms)\n  | none => [0]"]
    for i, ms in enumerate(conversations() + ILL_FORMED):
        lines.append(f"def conv{i} : List Message := [{', '.join(lean_message(m) for m in ms)}]")
        lines.append(
            f'#eval! IO.println ("{{\\"case\\": {i}, \\"text\\": " ++ toString (codes (serialize conv{i})) ++ '
            f'", \\"reparsed\\": " ++ toString (reparsed (serialize conv{i})) ++ '
            f'", \\"render\\": " ++ toString (codes (render conv{i})) ++ '
            f'", \\"count\\": " ++ toString (placeholderCount (serialize conv{i})) ++ '
            f'", \\"wf\\": " ++ toString (conversationWF conv{i}) ++ "}}")')
    return bundle(REPO, dependency_order(REPO, MODULES)) + "\n" + "\n".join(lines) + "\n"


@cache
def lean_results() -> dict[int, dict]:
    out = {}
    for m in run_lean(lean_source(), "ChatTemplateEval"):
        if m.severity == "information" and m.text.lstrip().startswith("{"):
            row = json.loads(m.text)
            out[row["case"]] = row
    assert len(out) == len(conversations()) + len(ILL_FORMED), sorted(out)
    return out


def decode(codes: list[int]) -> str:
    return "".join(map(chr, codes))


@pytest.mark.lean
def test_lean_serializer_equals_pybridge() -> None:
    results = lean_results()
    for i, ms in enumerate(conversations()):
        lean, text = results[i], ct.serialize(ms)
        assert lean["wf"] is True, f"case {i}: Lean calls a conversation pybridge accepts ill-formed"
        assert decode(lean["text"]) == text, f"case {i}: Lean {decode(lean['text'])!r} vs pybridge {text!r}"
        assert decode(lean["reparsed"]) == text, f"case {i}: Lean parse does not round-trip"
        assert decode(lean["render"]) == ct.render(ms, add_generation_prompt=True)
        assert lean["count"] == ct.placeholder_count(text) == sum(isinstance(p, Media) for m in ms for p in m.content)
    for j, ms in enumerate(ILL_FORMED):
        assert results[len(conversations()) + j]["wf"] is False
        with pytest.raises(ChatTemplateError):
            ct.serialize(ms)
    assert sum(len(r["text"]) for r in results.values()) > 500  # not a vacuous agreement on empty texts


def _swap_user_assistant(ms: list[Message]) -> list[Message]:
    swap = {"user": "assistant", "assistant": "user"}
    return [Message(swap.get(m.role, m.role), m.content, ()) if m.role in swap else m for m in ms]


@pytest.mark.lean
def test_planted_bugs_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    results = lean_results()
    monkeypatch.setattr(ct, "END", "<|end|>")  # the newline after the end tag left out
    assert any(decode(results[i]["text"]) != ct.serialize(ms) for i, ms in enumerate(conversations()))
    monkeypatch.undo()
    # user and assistant tags swapped (calls dropped so the swapped messages stay well formed)
    plain = [(i, ms) for i, ms in enumerate(conversations()) if all(not m.tool_calls for m in ms) and ms]
    assert any(decode(results[i]["text"]) != ct.serialize(_swap_user_assistant(ms)) for i, ms in plain)
