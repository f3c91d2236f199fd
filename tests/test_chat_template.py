"""The XTML chat template (`pybridge/chat_template.py`): hand-written expected strings from the
grammar (docs/training.md, "Chat template"), round trips, transformers' engine as a second
renderer, the placeholder count tied to the multimodal splice, and named errors."""

from __future__ import annotations

import random

import pytest
import torch

from pybridge import chat_template as ct
from pybridge.chat_template import Argument, ChatTemplateError, Media, Message, Text, ToolCall
from pybridge.errors import InputError
from pybridge.multimodal import splice

DICTS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "What is in "}, {"type": "image"},
                                 {"type": "text", "text": "? (a<b, \"q\")"}]},
    {"role": "assistant", "content": "Let me look.",
     "tool_calls": [{"function": {"name": "lookup", "arguments": '{"q": "cat", "n": 3}'}},
                    {"name": "noop", "arguments": {}}]},
    {"role": "tool", "content": '{"ok":true}'},
]

#: written by hand from the grammar, not produced by the code under test
EXPECTED = (
    "<|system|>Be brief.<|end|>\n"
    "<|user|>What is in <|media_start|>image<|media_content|><|media_pad|><|media_end|>? (a<b, \"q\")<|end|>\n"
    "<|assistant|>Let me look."
    "<|call name=\"lookup\"|><|arg name=\"q\" type=\"string\"|>cat<|/arg|>"
    "<|arg name=\"n\" type=\"json\"|>3<|/arg|><|/call|>"
    "<|call name=\"noop\"|><|/call|><|end|>\n"
    "<|tool|>{\"ok\":true}<|end|>\n"
)


def test_serialize_matches_hand_written_text() -> None:
    assert ct.serialize(ct.from_dicts(DICTS)) == EXPECTED


def test_generation_prompt_opens_the_assistant_turn() -> None:
    ms = ct.from_dicts(DICTS)
    assert ct.render(ms, add_generation_prompt=True) == EXPECTED + "<|assistant|>"
    assert ct.render(ms) == EXPECTED
    assert ct.render([], add_generation_prompt=True) == "<|assistant|>"


def test_from_dicts_typed_messages() -> None:
    ms = ct.from_dicts(DICTS)
    assert ms[1].content == (Text("What is in "), Media("image"), Text("? (a<b, \"q\")"))
    assert ms[2].tool_calls == (ToolCall("lookup", (Argument("q", "string", "cat"), Argument("n", "json", "3"))),
                                ToolCall("noop", ()))
    # adjacent texts joined, empty texts dropped, a video, a JSON object argument
    m = ct.from_dicts([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"},
                                                    {"type": "text", "text": ""}, {"type": "video"}]}])[0]
    assert m.content == (Text("ab"), Media("video"))
    call = ct.from_dicts([{"role": "assistant", "tool_calls": [{"name": "f", "arguments": {"x": {"k": [1, 2]}}}]}])
    assert ct.serialize(call) == ('<|assistant|><|call name="f"|><|arg name="x" type="json"|>{"k":[1,2]}<|/arg|>'
                                  "<|/call|><|end|>\n")


def random_messages(rng: random.Random) -> list[Message]:
    alphabet = "ab <>|\"=\n{}é中"

    def text() -> str:
        while True:
            s = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
            if "<|" not in s:
                return s

    def name() -> str:
        return "".join(rng.choice("abz_.<>|") for _ in range(rng.randint(1, 5))).replace("<|", "x")

    out = []
    for _ in range(rng.randint(0, 4)):
        role = rng.choice(ct.ROLES)
        parts: list[Text | Media] = []
        for _ in range(rng.randint(0, 4)):
            if parts and isinstance(parts[-1], Text) or rng.random() < 0.4:
                parts.append(Media(rng.choice(ct.MEDIA_KINDS)))
            else:
                parts.append(Text(text()))
        calls = []
        if role == "assistant":
            for _ in range(rng.randint(0, 2)):
                args = tuple(Argument(name(), "string", text()) if rng.random() < 0.5
                             else Argument(name(), "json", str(rng.randint(-9, 99))) for _ in range(rng.randint(0, 3)))
                calls.append(ToolCall(name(), args))
        out.append(Message(role, tuple(parts), tuple(calls)))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_round_trip_random(seed: int) -> None:
    ms = random_messages(random.Random(seed))
    text = ct.serialize(ms)
    assert ct.parse(text) == ms
    assert ct.serialize(ct.parse(text)) == text
    assert ct.placeholder_count(text) == sum(isinstance(p, Media) for m in ms for p in m.content)


def test_round_trip_hand_written() -> None:
    assert ct.parse(EXPECTED) == ct.from_dicts(DICTS)
    assert ct.parse("") == []


@pytest.mark.parametrize("seed", range(8))
def test_transformers_engine_renders_the_same_text(seed: int) -> None:
    ms = random_messages(random.Random(100 + seed)) + ct.from_dicts(DICTS)
    for gen in (False, True):
        assert ct.render_jinja(ms, gen) == ct.render(ms, gen)


def test_placeholders_feed_the_multimodal_splice() -> None:
    """One `<|media_pad|>` per media item; the processor repeats the i-th one for the i-th clip's
    merged tokens, and `multimodal.splice` accepts exactly that many visual rows."""
    ms = ct.from_dicts([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "and"},
                                                     {"type": "video"}]}])
    text = ct.render(ms, add_generation_prompt=True)
    assert ct.placeholder_count(text) == 2
    tokens_per_clip, ph = [4, 6], 100  # merged tokens of the two clips; the tiny config's placeholder id
    pieces = text.split(ct.PLACEHOLDER)
    ids: list[int] = []
    for i, piece in enumerate(pieces):
        ids += [1 + ord(c) % 50 for c in piece]  # any non-placeholder ids for the other text
        if i < len(tokens_per_clip):
            ids += [ph] * tokens_per_clip[i]
    ids_bt = torch.tensor([ids])
    embeds = torch.zeros(1, len(ids), 3)
    out = splice(embeds, ids_bt, ph, torch.ones(sum(tokens_per_clip), 3))
    assert int(out.sum()) == 3 * sum(tokens_per_clip)
    with pytest.raises(InputError, match="placeholder"):
        splice(embeds, ids_bt, ph, torch.ones(sum(tokens_per_clip) - 1, 3))


BAD_DICTS = [
    ({"messages": "hi"}, "messages must be a list"),
    ([{"content": "x"}], "message 0: field 'role' is missing"),
    (["hi"], "message 0: expected an object"),
    ([{"role": "user", "content": "ok"}, {"role": "bot", "content": "x"}], "message 1: field 'role' must be one of"),
    ([{"role": "user", "content": [{"text": "a"}]}], "message 0: field 'content[0]': field 'type' is missing"),
    ([{"role": "user", "content": [{"type": "text"}]}], "message 0: field 'content[0]': field 'text' is missing"),
    ([{"role": "user", "content": [{"type": "audio"}]}], "message 0: field 'content[0].type' must be"),
    ([{"role": "user", "content": 3}], "message 0: field 'content' must be a string or a list"),
    ([{"role": "user", "content": {"type": "text"}}], "message 0: field 'content' must be a string or a list"),
    ([{"role": "assistant", "tool_calls": 5}], "message 0: field 'tool_calls' must be a list"),
    ([{"role": "user", "content": "a<|end|>"}], "message 0: field 'content[0]': text contains the reserved"),
    ([{"role": "assistant", "tool_calls": [{"arguments": {}}]}], "message 0: field 'tool_calls[0]': field 'name' is missing"),
    ([{"role": "assistant", "tool_calls": [{"name": "f"}]}], "message 0: field 'tool_calls[0]': field 'arguments' is missing"),
    ([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}],
     "message 0: field 'tool_calls[0]': field 'arguments' is not JSON"),
    ([{"role": "assistant", "tool_calls": [{"name": "f", "arguments": [1]}]}], "field 'arguments' must be an object"),
    ([{"role": "assistant", "tool_calls": [{"name": "a\"b", "arguments": {}}]}], "field 'tool_calls[0].name' 'a\"b' contains"),
    ([{"role": "assistant", "tool_calls": [{"name": "", "arguments": {}}]}], "field 'tool_calls[0].name' must be a nonempty"),
    ([{"role": "assistant", "tool_calls": [{"name": "f", "arguments": {"x": "v<|"}}]}],
     "field 'tool_calls[0].arguments[0].value' must be a string without"),
    ([{"role": "user", "tool_calls": [{"name": "f", "arguments": {}}]}], "message 0: field 'tool_calls' is only allowed"),
]


@pytest.mark.parametrize("bad, message", BAD_DICTS)
def test_bad_dicts_name_message_and_field(bad, message: str) -> None:
    with pytest.raises(ChatTemplateError) as err:
        ct.from_dicts(bad["messages"] if isinstance(bad, dict) else bad)
    assert message in str(err.value)


BAD_MESSAGES = [
    ([Message("user", (Text(""),))], "message 0: field 'content[0]': a text part must be a nonempty"),
    ([Message("user", (Text("a"), Text("b")))], "message 0: field 'content[1]': two adjacent text parts"),
    ([Message("user", (Media("audio"),))], "field 'content[0]': media kind must be one of"),
    ([Message("user"), Message("assistant", (), (ToolCall("f", (Argument("x", "json", "[1, 2]"),)),))],
     "message 1: field 'tool_calls[0].arguments[0].value' is not compact JSON"),
    ([Message("assistant", (), (ToolCall("f", (Argument("x", "int", "1"),)),))], "arguments[0].type' must be one of"),
    ([("user", "hi")], "message 0: expected a Message"),
]


@pytest.mark.parametrize("bad, message", BAD_MESSAGES)
def test_bad_messages_name_message_and_field(bad, message: str) -> None:
    with pytest.raises(ChatTemplateError) as err:
        ct.serialize(bad)
    assert message in str(err.value)


BAD_TEXTS = [
    ("<|user|>hi", "message 0: expected '<|end|>\\n'"),
    ("<|user|>hi<|end|>\n<|bot|>x<|end|>\n", "message 1: expected one of ('system', 'user', 'assistant', 'tool') (field 'role')"),
    ("hello", "message 0: expected '<|' (a role tag)"),
    ("<|user|><|media_start|>audio<|media_content|><|media_pad|><|media_end|><|end|>\n", "field 'content[0]' media kind"),
    ("<|user|><|media_start|>image<|media_pad|><|end|>\n", "the media placeholder"),
    ('<|assistant|><|call name="f"|><|arg name="x" type="int"|>1<|/arg|><|/call|><|end|>\n',
     "field 'tool_calls[0].arguments[0].type'"),
    ('<|assistant|><|call name="f"|><|end|>\n', "the end of the tool call"),
    ('<|user|><|call name="f"|><|/call|><|end|>\n', "message 0: field 'tool_calls' is only allowed"),
]


@pytest.mark.parametrize("text, message", BAD_TEXTS)
def test_bad_texts_name_message_and_position(text: str, message: str) -> None:
    with pytest.raises(ChatTemplateError) as err:
        ct.parse(text)
    assert message in str(err.value)


@pytest.mark.parametrize("seed", range(20))
def test_mutated_texts_parse_or_raise_named_errors(seed: int) -> None:
    """Truncations and one-character edits of valid texts: a parse (that serializes back to the
    same text) or a `ChatTemplateError` naming the message, never another exception."""
    rng = random.Random(1000 + seed)
    text = ct.serialize(random_messages(rng) + ct.from_dicts(DICTS))
    for _ in range(30):
        i = rng.randrange(len(text))
        variants = [text[:i], text[:i] + text[i + 1:], text[:i] + rng.choice('<|>"x\n') + text[i:]]
        for v in variants:
            try:
                assert ct.serialize(ct.parse(v)) == v
            except ChatTemplateError as err:
                assert str(err).startswith("message ")


def test_errors_are_input_errors() -> None:
    assert issubclass(ChatTemplateError, InputError)
