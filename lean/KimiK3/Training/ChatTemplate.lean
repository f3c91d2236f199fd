module

/-!
# The XTML chat template: messages, serializer, parser (report §4.1, Appendix F; k3-spec §2.12)

SFT and RL serialize conversations with XTML (k3-spec §2.12). The report gives its structure
(typed messages with explicit boundaries, tool calls with typed string / JSON arguments, media
placeholders, generation starting inside the assistant turn) but not its bytes, so the concrete
text here is **reconstructed** (docs/training.md, "Chat template"); `pybridge/chat_template.py`
is the same serializer, and a lean-marked test compares the two strings exactly. Grammar:

    message := "<|" role "|>" part* call* "<|end|>\n"
    part    := text | "<|media_start|>" kind "<|media_content|><|media_pad|><|media_end|>"
    call    := "<|call name=\"" name "\"|>" arg* "<|/call|>"
    arg     := "<|arg name=\"" name "\" type=\"" ("string" | "json") "\"|>" value "<|/arg|>"

Every structural token starts with `<|`; well-formed text never contains `<|` (`noOpen`), names
never contain `"`, two text parts are never adjacent, and only assistant messages call tools
(`Message.wf`). Texts are `List Char`; the literals are written as character lists so that the
proofs (`ChatTemplateRoundTrip.lean`) compute with them. Loops take a fuel argument (the input
length: every item consumes a character) and use only this file's own recursion, so the code also
runs under the offline interpreter.
-/

@[expose] public section

namespace KimiK3.Training.ChatTemplate

/-- Text is a list of characters (k3-spec §2.12). -/
abbrev Text := List Char

/-- The four message roles of XTML (report App. F). -/
inductive Role where
  | system | user | assistant | tool

/-- The kind of a media item (report App. F; MoonViT-V2 reads images and videos, k3-spec §2.9). -/
inductive MediaKind where
  | image | video

/-- A tool-call argument's type: a plain string, or compact JSON (report App. F). -/
inductive ArgKind where
  | string | json

/-- A piece of message content: text, or one media item (serialized with its placeholder). -/
inductive Part where
  | text (t : Text)
  | media (kind : MediaKind)

/-- One named, typed tool-call argument (report App. F). -/
structure Argument where
  name : Text
  kind : ArgKind
  value : Text

/-- One tool call: the tool's name and its arguments in order (report App. F). -/
structure ToolCall where
  name : Text
  arguments : List Argument

/-- One message: role, content parts, then tool calls (report App. F). -/
structure Message where
  role : Role
  content : List Part
  calls : List ToolCall

/-- Concatenation (`List.append`, whose compiled code the offline interpreter lacks;
`cat_eq_append`). -/
def cat : Text → Text → Text
  | [], s => s
  | c :: r, s => c :: cat r s

/-! ## Literals -/

/-- The role's name (k3-spec §2.12). -/
def roleWord : Role → Text
  | .system => ['s', 'y', 's', 't', 'e', 'm']
  | .user => ['u', 's', 'e', 'r']
  | .assistant => ['a', 's', 's', 'i', 's', 't', 'a', 'n', 't']
  | .tool => ['t', 'o', 'o', 'l']

/-- `<|role|>`, the opening of a message. -/
def roleTag (r : Role) : Text := '<' :: '|' :: cat (roleWord r) ['|', '>']

/-- `<|end|>` and the newline closing a message. -/
def endTag : Text := ['<', '|', 'e', 'n', 'd', '|', '>', '\n']

/-- `<|media_start|>`. -/
def mediaStart : Text := ['<', '|', 'm', 'e', 'd', 'i', 'a', '_', 's', 't', 'a', 'r', 't', '|', '>']

/-- The media kind's name. -/
def kindWord : MediaKind → Text
  | .image => ['i', 'm', 'a', 'g', 'e']
  | .video => ['v', 'i', 'd', 'e', 'o']

/-- `<|media_pad|>`: the media placeholder (the token of `media_placeholder_token_id`, k3-spec §7). -/
def placeholder : Text := ['<', '|', 'm', 'e', 'd', 'i', 'a', '_', 'p', 'a', 'd', '|', '>']

/-- `<|media_content|><|media_pad|><|media_end|>`, closing a media item. -/
def mediaRest : Text :=
  cat ['<', '|', 'm', 'e', 'd', 'i', 'a', '_', 'c', 'o', 'n', 't', 'e', 'n', 't', '|', '>']
    (cat placeholder ['<', '|', 'm', 'e', 'd', 'i', 'a', '_', 'e', 'n', 'd', '|', '>'])

/-- `<|call name="`. -/
def callOpen : Text := ['<', '|', 'c', 'a', 'l', 'l', ' ', 'n', 'a', 'm', 'e', '=', '"']

/-- `"|>`, closing a tag's attributes. -/
def attrEnd : Text := ['"', '|', '>']

/-- `<|/call|>`. -/
def callClose : Text := ['<', '|', '/', 'c', 'a', 'l', 'l', '|', '>']

/-- `<|arg name="`. -/
def argOpen : Text := ['<', '|', 'a', 'r', 'g', ' ', 'n', 'a', 'm', 'e', '=', '"']

/-- `" type="`. -/
def argType : Text := ['"', ' ', 't', 'y', 'p', 'e', '=', '"']

/-- The argument type's name. -/
def argKindWord : ArgKind → Text
  | .string => ['s', 't', 'r', 'i', 'n', 'g']
  | .json => ['j', 's', 'o', 'n']

/-- `<|/arg|>`. -/
def argClose : Text := ['<', '|', '/', 'a', 'r', 'g', '|', '>']

/-! ## Serializer -/

/-- One content part's text: the text itself, or the media item with its placeholder. -/
def serializePart : Part → Text
  | .text t => t
  | .media k => cat mediaStart (cat (kindWord k) mediaRest)

/-- The content parts, in order. -/
def serializeParts : List Part → Text
  | [] => []
  | p :: ps => cat (serializePart p) (serializeParts ps)

/-- One argument: `<|arg name="N" type="T"|>V<|/arg|>`. -/
def serializeArg (a : Argument) : Text :=
  cat argOpen (cat a.name (cat argType (cat (argKindWord a.kind) (cat attrEnd (cat a.value argClose)))))

/-- The arguments, in order. -/
def serializeArgs : List Argument → Text
  | [] => []
  | a :: as => cat (serializeArg a) (serializeArgs as)

/-- One tool call: `<|call name="N"|>args<|/call|>`. -/
def serializeCall (c : ToolCall) : Text :=
  cat callOpen (cat c.name (cat attrEnd (cat (serializeArgs c.arguments) callClose)))

/-- The tool calls, in order (the parallel batch's order). -/
def serializeCalls : List ToolCall → Text
  | [] => []
  | c :: cs => cat (serializeCall c) (serializeCalls cs)

/-- One message: role tag, parts, calls, end tag (report App. F, reconstructed bytes). -/
def serializeMessage (m : Message) : Text :=
  cat (roleTag m.role) (cat (serializeParts m.content) (cat (serializeCalls m.calls) endTag))

/-- **The serializer**: a conversation's XTML text (report App. F). -/
def serialize : List Message → Text
  | [] => []
  | m :: ms => cat (serializeMessage m) (serialize ms)

/-- The conversation, then the open assistant turn the model continues (generation prompt). -/
def render (ms : List Message) : Text := cat (serialize ms) (roleTag .assistant)

/-! ## Well-formedness -/

/-- Whether a text starts with the reserved `<|`. -/
def atOpen : Text → Bool
  | c :: d :: _ => decide (c = '<') && decide (d = '|')
  | _ => false

/-- No `<|` anywhere in the text: it cannot forge a structural token. -/
def noOpen : Text → Bool
  | [] => true
  | c :: s => !atOpen (c :: s) && noOpen s

/-- No `"` in the text (names sit inside an attribute's quotes). -/
def noQuote : Text → Bool
  | [] => true
  | c :: s => !decide (c = '"') && noQuote s

/-- Whether a list is nonempty. -/
def nonempty : Text → Bool
  | [] => false
  | _ :: _ => true

/-- A name: nonempty, no `"`, no `<|`. -/
def nameWF (n : Text) : Bool := nonempty n && noQuote n && noOpen n

/-- Whether the parts do not start with a text part. -/
def startsNonText : List Part → Bool
  | .text _ :: _ => false
  | _ => true

/-- Text parts nonempty, without `<|`, never adjacent. -/
def partsWF : List Part → Bool
  | [] => true
  | .media _ :: ps => partsWF ps
  | .text t :: ps => nonempty t && noOpen t && startsNonText ps && partsWF ps

/-- Arguments with well-formed names and values without `<|`. -/
def argsWF : List Argument → Bool
  | [] => true
  | a :: as => nameWF a.name && noOpen a.value && argsWF as

/-- Calls with well-formed names and arguments. -/
def callsWF : List ToolCall → Bool
  | [] => true
  | c :: cs => nameWF c.name && argsWF c.arguments && callsWF cs

/-- Whether a role is the assistant's. -/
def Role.isAssistant : Role → Bool
  | .assistant => true
  | _ => false

/-- Whether a message has no tool calls. -/
def noCalls : List ToolCall → Bool
  | [] => true
  | _ :: _ => false

/-- **Well-formed message**: well-formed parts and calls, and calls only from the assistant. -/
def Message.wf (m : Message) : Bool :=
  partsWF m.content && callsWF m.calls && (m.role.isAssistant || noCalls m.calls)

/-- Every message well formed. -/
def conversationWF : List Message → Bool
  | [] => true
  | m :: ms => m.wf && conversationWF ms

/-! ## Parser -/

/-- `s` without the prefix `p`, if `s` starts with `p`. -/
def dropLit : Text → Text → Option Text
  | [], s => some s
  | c :: p, d :: s => if c = d then dropLit p s else none
  | _ :: _, [] => none

/-- The text up to the first `<|` (or the end), and the rest. -/
def takeText : Text → Text × Text
  | [] => ([], [])
  | c :: s => if atOpen (c :: s) then ([], c :: s) else
      let r := takeText s
      (c :: r.1, r.2)

/-- The text up to the first `"` (or the end), and the rest. -/
def takeName : Text → Text × Text
  | [] => ([], [])
  | c :: s => if c = '"' then ([], c :: s) else
      let r := takeName s
      (c :: r.1, r.2)

/-- The character count (fuel of the loops). -/
def len : Text → Nat
  | [] => 0
  | _ :: s => len s + 1

/-- A role tag. -/
def parseRole (s : Text) : Option (Role × Text) :=
  match dropLit (roleTag .system) s with
  | some r => some (.system, r)
  | none => match dropLit (roleTag .user) s with
    | some r => some (.user, r)
    | none => match dropLit (roleTag .assistant) s with
      | some r => some (.assistant, r)
      | none => match dropLit (roleTag .tool) s with
        | some r => some (.tool, r)
        | none => none

/-- A media kind. -/
def parseKind (s : Text) : Option (MediaKind × Text) :=
  match dropLit (kindWord .image) s with
  | some r => some (.image, r)
  | none => match dropLit (kindWord .video) s with
    | some r => some (.video, r)
    | none => none

/-- A media item. -/
def parseMedia (s : Text) : Option (MediaKind × Text) :=
  match dropLit mediaStart s with
  | none => none
  | some r => match parseKind r with
    | none => none
    | some (k, r') => match dropLit mediaRest r' with
      | none => none
      | some r'' => some (k, r'')

/-- Content parts, until a structural token that is not a media item (or the fuel ends). -/
def parseParts : Nat → Text → List Part × Text
  | 0, s => ([], s)
  | n + 1, s => match parseMedia s with
    | some (k, r) =>
      let p := parseParts n r
      (.media k :: p.1, p.2)
    | none => match s with
      | [] => ([], [])
      | c :: s' => if atOpen (c :: s') then ([], c :: s') else
          let t := takeText (c :: s')
          let p := parseParts n t.2
          (.text t.1 :: p.1, p.2)

/-- An argument type. -/
def parseArgKind (s : Text) : Option (ArgKind × Text) :=
  match dropLit (argKindWord .string) s with
  | some r => some (.string, r)
  | none => match dropLit (argKindWord .json) s with
    | some r => some (.json, r)
    | none => none

/-- One argument. -/
def parseArg (s : Text) : Option (Argument × Text) :=
  match dropLit argOpen s with
  | none => none
  | some r =>
    let nm := takeName r
    match dropLit argType nm.2 with
    | none => none
    | some r1 => match parseArgKind r1 with
      | none => none
      | some (k, r2) => match dropLit attrEnd r2 with
        | none => none
        | some r3 =>
          let v := takeText r3
          match dropLit argClose v.2 with
          | none => none
          | some r4 => some (⟨nm.1, k, v.1⟩, r4)

/-- Arguments, while one parses. -/
def parseArgs : Nat → Text → List Argument × Text
  | 0, s => ([], s)
  | n + 1, s => match parseArg s with
    | none => ([], s)
    | some (a, r) =>
      let p := parseArgs n r
      (a :: p.1, p.2)

/-- One tool call. -/
def parseCall (s : Text) : Option (ToolCall × Text) :=
  match dropLit callOpen s with
  | none => none
  | some r =>
    let nm := takeName r
    match dropLit attrEnd nm.2 with
    | none => none
    | some r1 =>
      let as := parseArgs (len r1) r1
      match dropLit callClose as.2 with
      | none => none
      | some r2 => some (⟨nm.1, as.1⟩, r2)

/-- Tool calls, while one parses. -/
def parseCalls : Nat → Text → List ToolCall × Text
  | 0, s => ([], s)
  | n + 1, s => match parseCall s with
    | none => ([], s)
    | some (c, r) =>
      let p := parseCalls n r
      (c :: p.1, p.2)

/-- One message. -/
def parseMessage (s : Text) : Option (Message × Text) :=
  match parseRole s with
  | none => none
  | some (role, s1) =>
    let ps := parseParts (len s1) s1
    let cs := parseCalls (len ps.2) ps.2
    match dropLit endTag cs.2 with
    | none => none
    | some s2 => some (⟨role, ps.1, cs.1⟩, s2)

/-- Messages until the end of the text; `none` if some message does not parse. -/
def parseMessages : Nat → Text → Option (List Message)
  | _, [] => some []
  | 0, _ :: _ => none
  | n + 1, c :: s => match parseMessage (c :: s) with
    | none => none
    | some (m, r) => match parseMessages n r with
      | none => none
      | some ms => some (m :: ms)

/-- **The parser**: the messages of an XTML text, if it is one (inverse of `serialize` on
well-formed messages, `parse_serialize`). -/
def parse (s : Text) : Option (List Message) := parseMessages (len s) s

end KimiK3.Training.ChatTemplate
