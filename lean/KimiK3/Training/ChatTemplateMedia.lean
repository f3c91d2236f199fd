module

public import KimiK3.Training.ChatTemplateRoundTrip

/-!
# XTML media placeholders: one per media item (report App. F; k3-spec §2.5, §2.12)

The serializer writes each media item as `<|media_start|>kind<|media_content|><|media_pad|><|media_end|>`.
`placeholderCount` counts the occurrences of `<|media_pad|>` in a text, at every position, so
nothing but the characters is trusted: **`placeholderCount_serialize`** proves a well-formed
conversation's text holds exactly as many placeholders as it has media items (well-formed text
and names never contain `<|`, so no placeholder can start inside them or straddle a boundary).
The tokenizer turns each `<|media_pad|>` into one `media_placeholder_token_id` and the processor
repeats the `i`-th one `h'·w'` times for the `i`-th clip; that count is what `Vision.spliceClip`
takes (`spliceClip_count`). Those two steps are pybridge's, not Lean's.
-/

@[expose] public section

namespace KimiK3.Training.ChatTemplate

/-- Whether `p` is a prefix of `s`. -/
def startsWithLit : Text → Text → Bool
  | [], _ => true
  | c :: p, d :: s => decide (c = d) && startsWithLit p s
  | _ :: _, [] => false

/-- The number of positions of a text where `<|media_pad|>` starts (k3-spec §2.5). -/
def placeholderCount : Text → Nat
  | [] => 0
  | c :: s => (if startsWithLit placeholder (c :: s) then 1 else 0) + placeholderCount s

/-- The media items of some parts. -/
def mediaParts : List Part → Nat
  | [] => 0
  | .media _ :: ps => mediaParts ps + 1
  | .text _ :: ps => mediaParts ps

/-- The media items of a conversation. -/
def mediaCount : List Message → Nat
  | [] => 0
  | m :: ms => mediaParts m.content + mediaCount ms

theorem atOpen_of_startsWithLit (s : Text) (h : startsWithLit placeholder s = true) :
    atOpen s = true := by
  match s with
  | [] => simp [startsWithLit, placeholder] at h
  | [_] => simp [startsWithLit, placeholder] at h
  | c :: d :: s =>
    simp only [startsWithLit, placeholder, Bool.and_eq_true, decide_eq_true_eq] at h
    simp [atOpen, ← h.1, ← h.2.1]

/-- A text without `<|`, followed by anything but `|`, adds no placeholder. -/
theorem placeholderCount_text (t s : Text) (hno : noOpen t = true) (hs : s.head? ≠ some '|') :
    placeholderCount (t ++ s) = placeholderCount s := by
  induction t with
  | nil => rfl
  | cons c t ih =>
    have hc := atOpen_append_eq_false c t s hno hs
    have hp : startsWithLit placeholder (c :: t ++ s) = false := by
      cases h : startsWithLit placeholder (c :: t ++ s)
      · rfl
      · rw [atOpen_of_startsWithLit _ h] at hc; exact absurd hc (by simp)
    simp only [noOpen, Bool.and_eq_true] at hno
    simp only [List.cons_append] at hp
    simp [placeholderCount, hp, ih hno.2]

theorem head_ne_bar_of_atOpen (s : Text) (h : atOpen s = true) : s.head? ≠ some '|' := by
  rw [head_of_atOpen s h]; simp

theorem head_argType_ne (s : Text) : (argType ++ s).head? ≠ some '|' := by simp [argType]

theorem head_attrEnd_ne (s : Text) : (attrEnd ++ s).head? ≠ some '|' := by simp [attrEnd]

/-! ## The literals' counts (computed) -/

theorem count_endTag (s : Text) : placeholderCount (endTag ++ s) = placeholderCount s := by
  simp [placeholderCount, startsWithLit, endTag, placeholder]

theorem count_roleTag (r : Role) (s : Text) : placeholderCount (roleTag r ++ s) = placeholderCount s := by
  cases r <;> simp [placeholderCount, startsWithLit, roleTag, roleWord, cat, placeholder]

theorem count_media (k : MediaKind) (s : Text) :
    placeholderCount (serializePart (.media k) ++ s) = placeholderCount s + 1 := by
  cases k <;> simp [serializePart, cat, placeholderCount, startsWithLit, mediaStart, kindWord, mediaRest,
    placeholder] <;> omega

theorem count_callOpen (s : Text) : placeholderCount (callOpen ++ s) = placeholderCount s := by
  simp [placeholderCount, startsWithLit, callOpen, placeholder]

theorem count_attrEnd (s : Text) : placeholderCount (attrEnd ++ s) = placeholderCount s := by
  simp [placeholderCount, startsWithLit, attrEnd, placeholder]

theorem count_callClose (s : Text) : placeholderCount (callClose ++ s) = placeholderCount s := by
  simp [placeholderCount, startsWithLit, callClose, placeholder]

theorem count_argOpen (s : Text) : placeholderCount (argOpen ++ s) = placeholderCount s := by
  simp [placeholderCount, startsWithLit, argOpen, placeholder]

theorem count_argType (s : Text) : placeholderCount (argType ++ s) = placeholderCount s := by
  simp [placeholderCount, startsWithLit, argType, placeholder]

theorem count_argKindWord (k : ArgKind) (s : Text) :
    placeholderCount (argKindWord k ++ s) = placeholderCount s := by
  cases k <;> simp [placeholderCount, startsWithLit, argKindWord, placeholder]

theorem count_argClose (s : Text) : placeholderCount (argClose ++ s) = placeholderCount s := by
  simp [placeholderCount, startsWithLit, argClose, placeholder]

/-! ## Each level -/

theorem count_serializeArgs (as : List Argument) (s : Text) (hwf : argsWF as = true) :
    placeholderCount (serializeArgs as ++ s) = placeholderCount s := by
  induction as with
  | nil => rfl
  | cons a as ih =>
    simp only [argsWF, nameWF, Bool.and_eq_true] at hwf
    obtain ⟨⟨⟨⟨_, _⟩, hn⟩, hv⟩, hwf⟩ := hwf
    simp only [serializeArgs, serializeArg, cat_eq_append, List.append_assoc]
    rw [count_argOpen, placeholderCount_text _ _ hn (head_argType_ne _), count_argType, count_argKindWord,
      count_attrEnd, placeholderCount_text _ _ hv (head_ne_bar_of_atOpen _ (atOpen_argClose _)),
      count_argClose, ih hwf]

theorem count_serializeCalls (cs : List ToolCall) (s : Text) (hwf : callsWF cs = true) :
    placeholderCount (serializeCalls cs ++ s) = placeholderCount s := by
  induction cs with
  | nil => rfl
  | cons c cs ih =>
    simp only [callsWF, nameWF, Bool.and_eq_true] at hwf
    obtain ⟨⟨⟨⟨_, _⟩, hn⟩, ha⟩, hwf⟩ := hwf
    have h := count_serializeArgs c.arguments (callClose ++ serializeCalls cs ++ s) ha
    simp only [List.append_assoc] at h
    simp only [serializeCalls, serializeCall, cat_eq_append, List.append_assoc]
    rw [count_callOpen, placeholderCount_text _ _ hn (head_attrEnd_ne _), count_attrEnd, h,
      count_callClose, ih hwf]

theorem count_serializeParts (ps : List Part) (s : Text) (hwf : partsWF ps = true)
    (hs : atOpen s = true) : placeholderCount (serializeParts ps ++ s) = mediaParts ps + placeholderCount s := by
  induction ps with
  | nil => simp [serializeParts, mediaParts]
  | cons p ps ih =>
    match p with
    | .media k =>
      have h := count_media k (serializeParts ps ++ s)
      simp only [serializeParts, cat_eq_append, List.append_assoc, h, mediaParts,
        ih (by simpa [partsWF] using hwf)]
      omega
    | .text t =>
      simp only [partsWF, Bool.and_eq_true] at hwf
      obtain ⟨⟨⟨_, hno⟩, hnt⟩, hwf⟩ := hwf
      have hR := atOpen_serializeParts ps s hnt hs
      simp only [serializeParts, serializePart, cat_eq_append, List.append_assoc, mediaParts,
        placeholderCount_text _ _ hno (head_ne_bar_of_atOpen _ hR), ih hwf]

theorem count_serializeMessage (m : Message) (s : Text) (hwf : m.wf = true) :
    placeholderCount (serializeMessage m ++ s) = mediaParts m.content + placeholderCount s := by
  obtain ⟨role, ps, cs⟩ := m
  simp only [Message.wf, Bool.and_eq_true] at hwf
  obtain ⟨⟨hps, hcs⟩, _⟩ := hwf
  have hrest : atOpen (serializeCalls cs ++ (endTag ++ s)) = true := by
    match cs with
    | [] => rfl
    | _ :: _ => rfl
  simp only [serializeMessage, cat_eq_append, List.append_assoc, count_roleTag,
    count_serializeParts ps _ hps hrest, count_serializeCalls cs _ hcs, count_endTag]

theorem count_serialize_append (ms : List Message) (s : Text) (hwf : conversationWF ms = true) :
    placeholderCount (serialize ms ++ s) = mediaCount ms + placeholderCount s := by
  induction ms with
  | nil => simp [serialize, mediaCount]
  | cons m ms ih =>
    simp only [conversationWF, Bool.and_eq_true] at hwf
    simp only [serialize, cat_eq_append, List.append_assoc, count_serializeMessage m _ hwf.1,
      ih hwf.2, mediaCount]
    omega

/-- **One placeholder per media item**: a well-formed conversation's XTML text holds exactly
`mediaCount ms` occurrences of `<|media_pad|>` (report App. F; k3-spec §2.5). -/
theorem placeholderCount_serialize (ms : List Message) (hwf : conversationWF ms = true) :
    placeholderCount (serialize ms) = mediaCount ms := by
  simpa using count_serialize_append ms [] hwf

/-- The generation prompt adds no placeholder. -/
theorem placeholderCount_render (ms : List Message) (hwf : conversationWF ms = true) :
    placeholderCount (render ms) = mediaCount ms := by
  have h := count_roleTag .assistant []
  simp only [List.append_nil] at h
  rw [render, cat_eq_append, count_serialize_append ms _ hwf, h]
  rfl

end KimiK3.Training.ChatTemplate
