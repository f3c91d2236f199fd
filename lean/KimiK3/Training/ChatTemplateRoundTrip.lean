module

public import KimiK3.Training.ChatTemplate

/-!
# The XTML round trip: `parse (serialize ms) = some ms` (report App. F; k3-spec §2.12)

Structural lemmas on lists of characters: a literal is dropped from its own front
(`dropLit_append`) and refused by a text that does not start with `<|`
(`dropLit_eq_none_of_atOpen`); a text without `<|` is read back up to the next structural token
(`takeText_append`), a name without `"` up to its closing quote (`takeName_append`). Each
grammar level is then read back from its serialization followed by what the grammar lets follow
it, which never parses as the same level: **`parse_serialize`**.
-/

@[expose] public section

namespace KimiK3.Training.ChatTemplate

theorem cat_eq_append (a b : Text) : cat a b = a ++ b := by
  induction a with
  | nil => rfl
  | cons c a ih => simp [cat, ih]

theorem len_eq_length (s : Text) : len s = s.length := by
  induction s with
  | nil => rfl
  | cons _ s ih => simp [len, ih]

theorem dropLit_append (p s : Text) : dropLit p (p ++ s) = some s := by
  induction p with
  | nil => rfl
  | cons c p ih => simp [dropLit, ih]

/-- A literal starting with `<|` is refused by a text that does not start with `<|`. -/
theorem dropLit_eq_none_of_atOpen (p s : Text) (hp : atOpen p = true) (hs : atOpen s = false) :
    dropLit p s = none := by
  match p, s with
  | [], _ => simp [atOpen] at hp
  | [_], _ => simp [atOpen] at hp
  | a :: b :: p, [] => rfl
  | a :: b :: p, [c] =>
    by_cases h : a = c
    · simp [dropLit, h]
    · simp [dropLit, h]
  | a :: b :: p, c :: d :: s =>
    simp only [atOpen, Bool.and_eq_true, decide_eq_true_eq] at hp
    obtain ⟨rfl, rfl⟩ := hp
    simp only [atOpen, Bool.and_eq_false_iff, decide_eq_false_iff_not] at hs
    by_cases hc : c = '<'
    · subst hc
      have hd : d ≠ '|' := by
        rcases hs with hs | hs
        · exact absurd rfl hs
        · exact hs
      simp [dropLit, Ne.symm hd]
    · simp [dropLit, Ne.symm hc]

theorem head_of_atOpen (s : Text) (h : atOpen s = true) : s.head? = some '<' := by
  match s with
  | [] => simp [atOpen] at h
  | [_] => simp [atOpen] at h
  | c :: d :: s =>
    simp only [atOpen, Bool.and_eq_true, decide_eq_true_eq] at h
    simp [h.1]

/-- A nonempty text without `<|`, followed by anything but `|`, does not start with `<|`. -/
theorem atOpen_append_eq_false (c : Char) (t s : Text) (hno : noOpen (c :: t) = true)
    (hs : s.head? ≠ some '|') : atOpen (c :: t ++ s) = false := by
  match t, s with
  | [], [] => rfl
  | [], d :: s =>
    have hd : d ≠ '|' := fun h => hs (by simp [h])
    simp [atOpen, hd]
  | d :: t, s =>
    simp only [noOpen, Bool.and_eq_true, Bool.not_eq_true'] at hno
    exact hno.1

theorem takeText_append (t s : Text) (hno : noOpen t = true) (hs : atOpen s = true) :
    takeText (t ++ s) = (t, s) := by
  induction t with
  | nil =>
    match s with
    | [] => simp [atOpen] at hs
    | c :: s => simp [takeText, hs]
  | cons c t ih =>
    have hhead : s.head? ≠ some '|' := by rw [head_of_atOpen s hs]; simp
    have hc := atOpen_append_eq_false c t s hno hhead
    simp only [noOpen, Bool.and_eq_true] at hno
    simp only [List.cons_append] at hc
    simp [takeText, hc, ih hno.2]

theorem takeName_append (t s : Text) (hq : noQuote t = true) (hs : s.head? = some '"') :
    takeName (t ++ s) = (t, s) := by
  induction t with
  | nil =>
    match s with
    | [] => simp at hs
    | c :: s =>
      simp only [List.head?_cons, Option.some.injEq] at hs
      simp [takeName, hs]
  | cons c t ih =>
    simp only [noQuote, Bool.and_eq_true, Bool.not_eq_true', decide_eq_false_iff_not] at hq
    simp [takeName, hq.1, ih hq.2]

/-! ## Facts about the literals -/

theorem atOpen_endTag (s : Text) : atOpen (endTag ++ s) = true := rfl
theorem atOpen_callOpen (s : Text) : atOpen (callOpen ++ s) = true := rfl
theorem atOpen_argClose (s : Text) : atOpen (argClose ++ s) = true := rfl
theorem atOpen_callClose (s : Text) : atOpen (callClose ++ s) = true := rfl
theorem atOpen_mediaStart : atOpen mediaStart = true := rfl
theorem head_argType (s : Text) : (argType ++ s).head? = some '"' := rfl
theorem head_attrEnd (s : Text) : (attrEnd ++ s).head? = some '"' := rfl

theorem parseRole_roleTag (r : Role) (s : Text) : parseRole (roleTag r ++ s) = some (r, s) := by
  cases r <;> simp [parseRole, roleTag, cat, roleWord, dropLit]

theorem parseKind_kindWord (k : MediaKind) (s : Text) : parseKind (kindWord k ++ s) = some (k, s) := by
  cases k <;> simp [parseKind, kindWord, dropLit]

theorem parseArgKind_argKindWord (k : ArgKind) (s : Text) :
    parseArgKind (argKindWord k ++ s) = some (k, s) := by
  cases k <;> simp [parseArgKind, argKindWord, dropLit]

theorem parseMedia_endTag (s : Text) : parseMedia (endTag ++ s) = none := by
  simp [parseMedia, mediaStart, endTag, dropLit]

theorem parseMedia_callOpen (s : Text) : parseMedia (callOpen ++ s) = none := by
  simp [parseMedia, mediaStart, callOpen, dropLit]

theorem parseCall_endTag (s : Text) : parseCall (endTag ++ s) = none := by
  simp [parseCall, callOpen, endTag, dropLit]

theorem parseArg_callClose (s : Text) : parseArg (callClose ++ s) = none := by
  simp [parseArg, argOpen, callClose, dropLit]

theorem parseMedia_eq_none (s : Text) (hs : atOpen s = false) : parseMedia s = none := by
  simp [parseMedia, dropLit_eq_none_of_atOpen mediaStart s atOpen_mediaStart hs]

theorem parseMedia_media (k : MediaKind) (s : Text) :
    parseMedia (serializePart (.media k) ++ s) = some (k, s) := by
  simp [cat_eq_append, serializePart, parseMedia, dropLit_append, parseKind_kindWord]

/-! ## Arguments and calls -/

theorem parseArg_serializeArg (a : Argument) (s : Text) (hq : noQuote a.name = true)
    (hv : noOpen a.value = true) : parseArg (serializeArg a ++ s) = some (a, s) := by
  simp [cat_eq_append, serializeArg, parseArg, dropLit_append, takeName_append _ _ hq (head_argType _),
    parseArgKind_argKindWord, takeText_append _ _ hv (atOpen_argClose _)]

theorem length_le_serializeArgs (as : List Argument) : as.length ≤ (serializeArgs as).length := by
  induction as with
  | nil => simp [serializeArgs]
  | cons a as ih => simp [cat_eq_append, serializeArgs, serializeArg, argOpen]; omega

theorem parseArgs_serializeArgs (as : List Argument) (rest : Text) (n : Nat) (hn : as.length ≤ n)
    (hwf : argsWF as = true) (hrest : parseArg rest = none) :
    parseArgs n (serializeArgs as ++ rest) = (as, rest) := by
  induction as generalizing n with
  | nil => cases n <;> simp [serializeArgs, parseArgs, hrest]
  | cons a as ih =>
    obtain ⟨n, rfl⟩ : ∃ m, n = m + 1 := ⟨n - 1, by simp at hn; omega⟩
    simp only [argsWF, nameWF, Bool.and_eq_true] at hwf
    simp only [serializeArgs, cat_eq_append, List.append_assoc, parseArgs,
      parseArg_serializeArg a _ hwf.1.1.1.2 hwf.1.2, ih n (by simp at hn; omega) hwf.2]

theorem parseCall_serializeCall (c : ToolCall) (s : Text) (hq : noQuote c.name = true)
    (hwf : argsWF c.arguments = true) : parseCall (serializeCall c ++ s) = some (c, s) := by
  have hfuel : c.arguments.length ≤ len (serializeArgs c.arguments ++ (callClose ++ s)) := by
    have := length_le_serializeArgs c.arguments
    simp [len_eq_length]; omega
  simp [cat_eq_append, serializeCall, parseCall, dropLit_append, takeName_append _ _ hq (head_attrEnd _),
    parseArgs_serializeArgs _ _ _ hfuel hwf (parseArg_callClose s)]

theorem length_le_serializeCalls (cs : List ToolCall) : cs.length ≤ (serializeCalls cs).length := by
  induction cs with
  | nil => simp [serializeCalls]
  | cons c cs ih => simp [cat_eq_append, serializeCalls, serializeCall, callOpen]; omega

theorem parseCalls_serializeCalls (cs : List ToolCall) (s : Text) (n : Nat) (hn : cs.length ≤ n)
    (hwf : callsWF cs = true) : parseCalls n (serializeCalls cs ++ (endTag ++ s)) = (cs, endTag ++ s) := by
  induction cs generalizing n with
  | nil => cases n <;> simp [serializeCalls, parseCalls, parseCall_endTag]
  | cons c cs ih =>
    obtain ⟨n, rfl⟩ : ∃ m, n = m + 1 := ⟨n - 1, by simp at hn; omega⟩
    simp only [callsWF, nameWF, Bool.and_eq_true] at hwf
    simp only [serializeCalls, cat_eq_append, List.append_assoc, parseCalls,
      parseCall_serializeCall c _ hwf.1.1.1.2 hwf.1.2, ih n (by simp at hn; omega) hwf.2]

/-! ## Parts -/

theorem atOpen_serializeParts (ps : List Part) (rest : Text) (hps : startsNonText ps = true)
    (hrest : atOpen rest = true) : atOpen (serializeParts ps ++ rest) = true := by
  match ps with
  | [] => simpa [serializeParts] using hrest
  | .media k :: ps => rfl
  | .text _ :: _ => simp [startsNonText] at hps

theorem length_le_serializeParts (ps : List Part) (hwf : partsWF ps = true) :
    ps.length ≤ (serializeParts ps).length := by
  induction ps with
  | nil => simp [serializeParts]
  | cons p ps ih =>
    match p with
    | .media k =>
      have := ih (by simpa [partsWF] using hwf)
      simp [cat_eq_append, serializeParts, serializePart, mediaStart]; omega
    | .text t =>
      simp only [partsWF, Bool.and_eq_true] at hwf
      have := ih hwf.2
      match t, hwf.1.1.1 with
      | _ :: _, _ => simp [cat_eq_append, serializeParts, serializePart]; omega

theorem parseParts_serializeParts (ps : List Part) (rest : Text) (n : Nat) (hn : ps.length ≤ n)
    (hwf : partsWF ps = true) (hrest : atOpen rest = true) (hmedia : parseMedia rest = none) :
    parseParts n (serializeParts ps ++ rest) = (ps, rest) := by
  induction ps generalizing n with
  | nil =>
    cases n with
    | zero => rfl
    | succ n =>
      match rest with
      | [] => simp [atOpen] at hrest
      | c :: s => simp [serializeParts, parseParts, hmedia, hrest]
  | cons p ps ih =>
    obtain ⟨n, rfl⟩ : ∃ m, n = m + 1 := ⟨n - 1, by simp at hn; omega⟩
    have hn' : ps.length ≤ n := by simp at hn; omega
    match p with
    | .media k =>
      have h := parseMedia_media k (serializeParts ps ++ rest)
      simp only [serializeParts, cat_eq_append, List.append_assoc, parseParts, h,
        ih n hn' (by simpa [partsWF] using hwf)]
    | .text t =>
      simp only [partsWF, Bool.and_eq_true] at hwf
      obtain ⟨⟨⟨hne, hno⟩, hnt⟩, hwf⟩ := hwf
      have hR := atOpen_serializeParts ps rest hnt hrest
      match t, hne with
      | c :: t, _ =>
        have hhead : (serializeParts ps ++ rest).head? ≠ some '|' := by
          rw [head_of_atOpen _ hR]; simp
        have hc := atOpen_append_eq_false c t _ hno hhead
        simp only [List.cons_append] at hc
        have hm := parseMedia_eq_none _ hc
        have ht := takeText_append (c :: t) _ hno hR
        simp only [List.cons_append] at ht
        simp only [serializeParts, serializePart, cat_eq_append, List.cons_append, List.append_assoc, parseParts,
          hm, hc, ht, ih n hn' hwf]
        simp

/-! ## Messages -/

theorem parseMessage_serializeMessage (m : Message) (s : Text) (hwf : m.wf = true) :
    parseMessage (serializeMessage m ++ s) = some (m, s) := by
  obtain ⟨role, ps, cs⟩ := m
  simp only [Message.wf, Bool.and_eq_true] at hwf
  obtain ⟨⟨hps, hcs⟩, _⟩ := hwf
  have hrest : atOpen (serializeCalls cs ++ (endTag ++ s)) = true := by
    match cs with
    | [] => rfl
    | _ :: _ => rfl
  have hmedia : parseMedia (serializeCalls cs ++ (endTag ++ s)) = none := by
    match cs with
    | [] => exact parseMedia_endTag s
    | c :: cs =>
      simp only [serializeCalls, serializeCall, cat_eq_append, List.append_assoc]
      exact parseMedia_callOpen _
  have hfp : ps.length ≤ len (serializeParts ps ++ (serializeCalls cs ++ (endTag ++ s))) := by
    have := length_le_serializeParts ps hps
    simp [len_eq_length]; omega
  have hfc : cs.length ≤ len (serializeCalls cs ++ (endTag ++ s)) := by
    have := length_le_serializeCalls cs
    simp [len_eq_length]; omega
  simp [cat_eq_append, serializeMessage, parseMessage, parseRole_roleTag, List.append_assoc,
    parseParts_serializeParts ps _ _ hfp hps hrest hmedia,
    parseCalls_serializeCalls cs s _ hfc hcs, dropLit_append]

theorem length_le_serialize (ms : List Message) : ms.length ≤ (serialize ms).length := by
  induction ms with
  | nil => simp [serialize]
  | cons m ms ih => simp [cat_eq_append, serialize, serializeMessage, roleTag]; omega

theorem parseMessages_serialize (ms : List Message) (n : Nat) (hn : ms.length ≤ n)
    (hwf : conversationWF ms = true) : parseMessages n (serialize ms) = some ms := by
  induction ms generalizing n with
  | nil => cases n <;> rfl
  | cons m ms ih =>
    obtain ⟨n, rfl⟩ : ∃ k, n = k + 1 := ⟨n - 1, by simp at hn; omega⟩
    simp only [conversationWF, Bool.and_eq_true] at hwf
    obtain ⟨t, ht⟩ : ∃ t, serializeMessage m ++ serialize ms = '<' :: t := ⟨_, rfl⟩
    have h := parseMessage_serializeMessage m (serialize ms) hwf.1
    rw [ht] at h
    simp only [serialize, cat_eq_append, ht, parseMessages, h, ih n (by simp at hn; omega) hwf.2]

/-- **The round trip** (report App. F): the parser reads every well-formed conversation back from
its serialization. -/
theorem parse_serialize (ms : List Message) (hwf : conversationWF ms = true) :
    parse (serialize ms) = some ms := by
  unfold parse
  rw [len_eq_length]
  exact parseMessages_serialize ms _ (length_le_serialize ms) hwf

end KimiK3.Training.ChatTemplate
