"""The XTML chat template (report §4.1, Appendix F; k3-spec §2.12): messages ↔ text.

The report gives XTML's structure (typed messages with explicit boundaries, tool calls with typed
arguments, media placeholders, generation inside the assistant turn); the released tokenizer's
template is not public, so the concrete bytes below are **reconstructed** (docs/training.md,
"Chat template"). The media placeholder is Kimi's public `<|media_pad|>` (the token of
`media_placeholder_token_id`, 163605 in the release), wrapped as in Kimi K2's public template.
Every structural token has the form `<|…|>`, and no text may contain `<|`, so text can never
forge one. The grammar, which `lean/KimiK3/Training/ChatTemplate.lean` states as the same
serializer and proves `parse (serialize ms) = some ms` for well-formed messages:

    conversation := message*
    message  := "<|" role "|>" part* call* "<|end|>" "\\n"      role: system | user | assistant | tool
    part     := text | "<|media_start|>" kind "<|media_content|><|media_pad|><|media_end|>"
    text     := a nonempty string without "<|" (two text parts are never adjacent)
    kind     := image | video
    call     := '<|call name="' name '"|>' arg* "<|/call|>"           (assistant messages only)
    arg      := '<|arg name="' name '" type="' ("string" | "json") '"|>' value "<|/arg|>"
    name     := a nonempty string without '"' and "<|";  value: a string without "<|"
    generation prompt := conversation "<|assistant|>"

A `json` argument holds compact JSON (`json.dumps(v, separators=(",", ":"), ensure_ascii=False)`),
a `string` argument the string itself (`from_dicts` chooses by the value's Python type).

    text = render(from_dicts([{"role": "user", "content": "Hi"}]), add_generation_prompt=True)
    messages = parse(text[: -len(GENERATION_PROMPT)])

`serialize` is the plain reference; `render_jinja` renders the same text with transformers' own
chat-template engine (`JINJA_TEMPLATE`), a second implementation the tests compare with. Parsing
has no engine in transformers (its chat templates only render), so `parse` is hand-written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pybridge.errors import InputError

ROLES = ("system", "user", "assistant", "tool")
MEDIA_KINDS = ("image", "video")
ARG_KINDS = ("string", "json")
OPEN = "<|"
END = "<|end|>\n"
MEDIA_START = "<|media_start|>"
MEDIA_REST = "<|media_content|><|media_pad|><|media_end|>"
PLACEHOLDER = "<|media_pad|>"
CALL_OPEN, CALL_CLOSE = '<|call name="', "<|/call|>"
ARG_OPEN, ARG_TYPE, ARG_CLOSE = '<|arg name="', '" type="', "<|/arg|>"
ATTR_END = '"|>'
GENERATION_PROMPT = "<|assistant|>"


class ChatTemplateError(InputError):
    """A message that cannot be serialized, or text that is not XTML; names the message and field."""


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Media:
    kind: str  # "image" | "video"


@dataclass(frozen=True)
class Argument:
    name: str
    kind: str  # "string" | "json"
    value: str


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: tuple[Argument, ...] = ()


@dataclass(frozen=True)
class Message:
    role: str
    content: tuple[Text | Media, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()


# ---------------------------------------------------------------- checks (the Lean `Message.WF`)

def _check_name(name: object, where: str) -> None:
    if not isinstance(name, str) or not name:
        raise ChatTemplateError(f"{where} must be a nonempty string, got {name!r}")
    if '"' in name or OPEN in name:
        raise ChatTemplateError(f"{where} {name!r} contains a reserved '\"' or '<|'")


def check(messages: Sequence[Message]) -> None:
    """Raise `ChatTemplateError` (message index and field) unless every message is well formed."""
    for i, m in enumerate(messages):
        at = f"message {i}"
        if not isinstance(m, Message):
            raise ChatTemplateError(f"{at}: expected a Message, got {type(m).__name__}")
        if m.role not in ROLES:
            raise ChatTemplateError(f"{at}: field 'role' must be one of {ROLES}, got {m.role!r}")
        for j, part in enumerate(m.content):
            where = f"{at}: field 'content[{j}]'"
            if isinstance(part, Text):
                if not isinstance(part.text, str) or not part.text:
                    raise ChatTemplateError(f"{where}: a text part must be a nonempty string, got {part.text!r}")
                if OPEN in part.text:
                    raise ChatTemplateError(f"{where}: text contains the reserved delimiter '<|' "
                                            f"at character {part.text.index(OPEN)}")
                if j > 0 and isinstance(m.content[j - 1], Text):
                    raise ChatTemplateError(f"{where}: two adjacent text parts (join them)")
            elif isinstance(part, Media):
                if part.kind not in MEDIA_KINDS:
                    raise ChatTemplateError(f"{where}: media kind must be one of {MEDIA_KINDS}, got {part.kind!r}")
            else:
                raise ChatTemplateError(f"{where}: expected Text or Media, got {type(part).__name__}")
        if m.tool_calls and m.role != "assistant":
            raise ChatTemplateError(f"{at}: field 'tool_calls' is only allowed on assistant messages (role {m.role!r})")
        for j, call in enumerate(m.tool_calls):
            _check_name(call.name, f"{at}: field 'tool_calls[{j}].name'")
            for k, arg in enumerate(call.arguments):
                w = f"{at}: field 'tool_calls[{j}].arguments[{k}]"
                _check_name(arg.name, f"{w}.name'")
                if arg.kind not in ARG_KINDS:
                    raise ChatTemplateError(f"{w}.type' must be one of {ARG_KINDS}, got {arg.kind!r}")
                if not isinstance(arg.value, str) or OPEN in arg.value:
                    raise ChatTemplateError(f"{w}.value' must be a string without '<|', got {arg.value!r}")
                if arg.kind == "json" and _compact(arg.value, f"{w}.value'") != arg.value:
                    raise ChatTemplateError(f"{w}.value' is not compact JSON: {arg.value!r}")


def _compact(text: str, where: str) -> str:
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except ValueError as err:
        raise ChatTemplateError(f"{where} is not JSON ({err}): {text!r}") from None


# ---------------------------------------------------------------- serializer (reference)

def serialize_part(part: Text | Media) -> str:
    return part.text if isinstance(part, Text) else MEDIA_START + part.kind + MEDIA_REST


def serialize_call(call: ToolCall) -> str:
    args = "".join(f"{ARG_OPEN}{a.name}{ARG_TYPE}{a.kind}{ATTR_END}{a.value}{ARG_CLOSE}" for a in call.arguments)
    return f"{CALL_OPEN}{call.name}{ATTR_END}{args}{CALL_CLOSE}"


def serialize(messages: Sequence[Message]) -> str:
    """The XTML text of well-formed messages (`check` first); the Lean `serialize`."""
    check(messages)
    return "".join(f"<|{m.role}|>" + "".join(map(serialize_part, m.content))
                   + "".join(map(serialize_call, m.tool_calls)) + END for m in messages)


def render(messages: Sequence[Message], add_generation_prompt: bool = False) -> str:
    """The conversation, then (if asked) the open assistant turn the model continues."""
    return serialize(messages) + (GENERATION_PROMPT if add_generation_prompt else "")


def placeholder_count(text: str) -> int:
    """Media placeholders in a text: one per media item (the Lean `placeholderCount_serialize`)."""
    return text.count(PLACEHOLDER)


# ---------------------------------------------------------------- parser

class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.pos, self.message = text, 0, 0

    def fail(self, what: str) -> ChatTemplateError:
        near = self.text[self.pos:self.pos + 24]
        return ChatTemplateError(f"message {self.message}: expected {what} at character {self.pos}, found {near!r}")

    def take(self, lit: str) -> bool:
        if self.text.startswith(lit, self.pos):
            self.pos += len(lit)
            return True
        return False

    def expect(self, lit: str, what: str) -> None:
        if not self.take(lit):
            raise self.fail(f"{lit!r} ({what})")

    def until(self, stop: str) -> str:
        end = self.text.find(stop, self.pos)
        end = len(self.text) if end < 0 else end
        out, self.pos = self.text[self.pos:end], end
        return out

    def choice(self, options: Sequence[str], what: str) -> str:
        for o in options:
            if self.take(o):
                return o
        raise self.fail(f"one of {tuple(options)} ({what})")


def parse(text: str) -> list[Message]:
    """The messages of an XTML text (inverse of `serialize`); `ChatTemplateError` names the message
    and the character where the text stops following the grammar."""
    r = _Reader(text)
    out: list[Message] = []
    while r.pos < len(text):
        r.message = len(out)
        r.expect(OPEN, "a role tag")
        role = r.choice(ROLES, "field 'role'")
        r.expect("|>", "the end of the role tag")
        parts: list[Text | Media] = []
        while r.pos < len(text):
            if r.take(MEDIA_START):
                kind = r.choice(MEDIA_KINDS, f"field 'content[{len(parts)}]' media kind")
                r.expect(MEDIA_REST, "the media placeholder")
                parts.append(Media(kind))
            elif text.startswith(OPEN, r.pos):
                break
            else:
                parts.append(Text(r.until(OPEN)))
        calls: list[ToolCall] = []
        while r.take(CALL_OPEN):
            name = r.until('"')
            r.expect(ATTR_END, f"the end of field 'tool_calls[{len(calls)}]' name")
            args: list[Argument] = []
            while r.take(ARG_OPEN):
                arg_name = r.until('"')
                r.expect(ARG_TYPE, "an argument type")
                kind = r.choice(ARG_KINDS, f"field 'tool_calls[{len(calls)}].arguments[{len(args)}].type'")
                r.expect(ATTR_END, "the end of the argument tag")
                value = r.until(OPEN)
                r.expect(ARG_CLOSE, "the end of the argument")
                args.append(Argument(arg_name, kind, value))
            r.expect(CALL_CLOSE, "the end of the tool call")
            calls.append(ToolCall(name, tuple(args)))
        r.expect(END, "the end of the message")
        out.append(Message(role, tuple(parts), tuple(calls)))
    check(out)
    return out


# ---------------------------------------------------------------- OpenAI-style dicts

def _field(d: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(d, Mapping):
        raise ChatTemplateError(f"{where}: expected an object, got {type(d).__name__}")
    if key not in d:
        raise ChatTemplateError(f"{where}: field '{key}' is missing")
    return d[key]


def _arguments(raw: Any, where: str) -> tuple[Argument, ...]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as err:
            raise ChatTemplateError(f"{where}: field 'arguments' is not JSON ({err})") from None
    if not isinstance(raw, Mapping):
        raise ChatTemplateError(f"{where}: field 'arguments' must be an object, got {type(raw).__name__}")
    return tuple(Argument(str(k), "string", v) if isinstance(v, str)
                 else Argument(str(k), "json", json.dumps(v, separators=(",", ":"), ensure_ascii=False))
                 for k, v in raw.items())


def from_dicts(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Messages from dicts `{"role", "content": str | [{"type": "text", "text"} | {"type": "image"}
    | {"type": "video"}], "tool_calls": [{"name", "arguments"} | {"function": {...}}]}`; empty
    texts are dropped and adjacent texts joined. Every fault names the message index and field."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ChatTemplateError(f"messages must be a list, got {type(messages).__name__}")
    out = []
    for i, d in enumerate(messages):
        at = f"message {i}"
        role = _field(d, "role", at)
        content = d.get("content") or ""
        items = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
            raise ChatTemplateError(f"{at}: field 'content' must be a string or a list, got {type(content).__name__}")
        parts: list[Text | Media] = []
        for j, item in enumerate(items):
            kind = _field(item, "type", f"{at}: field 'content[{j}]'")
            if kind == "text":
                text = _field(item, "text", f"{at}: field 'content[{j}]'")
                if not isinstance(text, str):
                    raise ChatTemplateError(f"{at}: field 'content[{j}].text' must be a string")
                if parts and isinstance(parts[-1], Text):
                    parts[-1] = Text(parts[-1].text + text)
                elif text:
                    parts.append(Text(text))
            elif kind in MEDIA_KINDS:
                parts.append(Media(kind))
            else:
                raise ChatTemplateError(f"{at}: field 'content[{j}].type' must be text, image or video, got {kind!r}")
        raw_calls = d.get("tool_calls") or ()
        if isinstance(raw_calls, (str, bytes, Mapping)) or not isinstance(raw_calls, Sequence):
            raise ChatTemplateError(f"{at}: field 'tool_calls' must be a list, got {type(raw_calls).__name__}")
        calls = []
        for j, c in enumerate(raw_calls):
            where = f"{at}: field 'tool_calls[{j}]'"
            fn = c.get("function", c) if isinstance(c, Mapping) else c
            calls.append(ToolCall(_field(fn, "name", where), _arguments(_field(fn, "arguments", where), where)))
        out.append(Message(role, tuple(parts), tuple(calls)))
    check(out)
    return out


# ---------------------------------------------------------------- the same text through transformers

#: The serializer as a chat template for transformers' engine (`render_jinja`); it reads the
#: messages as `to_dicts` writes them (content a list of typed parts, arguments typed).
JINJA_TEMPLATE = (
    "{%- for m in messages -%}<|{{ m.role }}|>"
    "{%- for p in m.content -%}{%- if p.type == 'text' -%}{{ p.text }}"
    "{%- else -%}<|media_start|>{{ p.type }}<|media_content|><|media_pad|><|media_end|>{%- endif -%}{%- endfor -%}"
    "{%- for c in m.tool_calls -%}<|call name=\"{{ c.name }}\"|>"
    "{%- for a in c.arguments -%}<|arg name=\"{{ a.name }}\" type=\"{{ a.type }}\"|>{{ a.value }}<|/arg|>{%- endfor -%}"
    "<|/call|>{%- endfor -%}<|end|>\n{% endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)


def to_dicts(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Plain dicts of the typed messages (what `JINJA_TEMPLATE` reads)."""
    return [{"role": m.role,
             "content": [{"type": "text", "text": p.text} if isinstance(p, Text) else {"type": p.kind} for p in m.content],
             "tool_calls": [{"name": c.name, "arguments": [{"name": a.name, "type": a.kind, "value": a.value}
                                                           for a in c.arguments]} for c in m.tool_calls]}
            for m in messages]


def render_jinja(messages: Sequence[Message], add_generation_prompt: bool = False) -> str:
    """`render` through transformers' chat-template engine (`render_jinja_template`)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    check(messages)
    rendered, _ = render_jinja_template([to_dicts(messages)], chat_template=JINJA_TEMPLATE,
                                        add_generation_prompt=add_generation_prompt)
    return rendered[0]
