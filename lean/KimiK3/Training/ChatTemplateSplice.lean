module

public import KimiK3.Training.ChatTemplateMedia
public import KimiK3.Vision.Splice

/-!
# XTML placeholders into the visual splice (k3-spec §2.5, §2.12, §7)

A conversation's text holds one `<|media_pad|>` per media item (`placeholderCount_serialize`).
The tokenizer gives each one the id `ph` (`media_placeholder_token_id`; taken as a hypothesis
here, the tokenizer is not formalized), and the processor repeats the `i`-th placeholder id for
the `i`-th clip's merged tokens (`expandPlaceholders`). **`placeholderCount_expandPlaceholders`**:
the expanded prompt then holds exactly `Σ counts` placeholder ids, so with one clip of
`h'·w'` merged tokens it meets the hypothesis of `Vision.spliceClip`
(**`spliceClip_placeholders`**; `spliceClip_count` ties `h'·w'` to the patch grid).
-/

@[expose] public section

noncomputable section

namespace KimiK3.Training.ChatTemplate

variable {V : Nat}

/-- `n` copies of the id `x`. -/
def copies (x : Fin V) : Nat → List (Fin V)
  | 0 => []
  | n + 1 => x :: copies x n

/-- The sum of a list of counts. -/
def sumCounts : List Nat → Nat
  | [] => 0
  | n :: ns => n + sumCounts ns

/-- The processor's expansion (k3-spec §2.5): the `i`-th placeholder id becomes `counts[i]`
placeholder ids (the `i`-th clip's merged tokens), other ids stay (a placeholder without a count
is dropped). -/
def expandPlaceholders (ph : Fin V) : List (Fin V) → List Nat → List (Fin V)
  | [], _ => []
  | t :: ts, counts =>
    if t = ph then
      match counts with
      | [] => expandPlaceholders ph ts []
      | n :: ns => copies ph n ++ expandPlaceholders ph ts ns
    else t :: expandPlaceholders ph ts counts

theorem placeholderCount_append (ph : Fin V) (a b : List (Fin V)) :
    KimiK3.Vision.placeholderCount ph (a ++ b) =
      KimiK3.Vision.placeholderCount ph a + KimiK3.Vision.placeholderCount ph b := by
  induction a with
  | nil => simp [KimiK3.Vision.placeholderCount]
  | cons t a ih => simp only [List.cons_append, KimiK3.Vision.placeholderCount, ih]; omega

theorem placeholderCount_copies (ph : Fin V) (n : Nat) :
    KimiK3.Vision.placeholderCount ph (copies ph n) = n := by
  induction n with
  | zero => rfl
  | succ n ih => simp [copies, KimiK3.Vision.placeholderCount, ih]; omega

/-- **Expanded placeholders**: a prompt with one placeholder id per clip holds, once each is
repeated for its clip, exactly the clips' total of merged tokens as placeholder ids. -/
theorem placeholderCount_expandPlaceholders (ph : Fin V) (ids : List (Fin V)) (counts : List Nat)
    (h : KimiK3.Vision.placeholderCount ph ids = counts.length) :
    KimiK3.Vision.placeholderCount ph (expandPlaceholders ph ids counts) = sumCounts counts := by
  induction ids generalizing counts with
  | nil =>
    match counts, h with
    | [], _ => rfl
    | _ :: _, h => simp [KimiK3.Vision.placeholderCount] at h
  | cons t ts ih =>
    by_cases ht : t = ph
    · simp only [KimiK3.Vision.placeholderCount, ht, if_true] at h
      match counts, h with
      | [], h => simp at h
      | n :: ns, h =>
        simp only [List.length_cons] at h
        simp only [expandPlaceholders, ht, if_true, placeholderCount_append, placeholderCount_copies,
          ih ns (by omega), sumCounts]
    · simp only [KimiK3.Vision.placeholderCount, ht, if_false, Nat.zero_add] at h
      simp [expandPlaceholders, ht, KimiK3.Vision.placeholderCount, ih counts h]

/-- **From the conversation to the splice**: if a well-formed conversation has one media item,
and its tokenization `ids` has one placeholder id per `<|media_pad|>` of the text (`hTok`), then
repeating it for a clip of `h'·w'` merged tokens gives a prompt `Vision.spliceClip` accepts. -/
theorem spliceClip_placeholders (ph : Fin V) (ms : List Message) (hwf : conversationWF ms = true)
    (hOne : mediaCount ms = 1) (ids : List (Fin V))
    (hTok : KimiK3.Vision.placeholderCount ph ids = placeholderCount (serialize ms)) (h' w' : Nat) :
    KimiK3.Vision.placeholderCount ph (expandPlaceholders ph ids [h' * w']) = h' * w' := by
  have h := placeholderCount_expandPlaceholders ph ids [h' * w']
    (by rw [hTok, placeholderCount_serialize ms hwf, hOne]; rfl)
  simpa [sumCounts] using h

/-- The splice of the clip's merged tokens into the expanded prompt (`spliceClip_placeholders`). -/
def spliceConversationClip (ph : Fin V) (ms : List Message) (hwf : conversationWF ms = true)
    (hOne : mediaCount ms = 1) (ids : List (Fin V))
    (hTok : KimiK3.Vision.placeholderCount ph ids = placeholderCount (serialize ms)) (h' w' : Nat) :
    List (KimiK3.InputSlot V (h' * w')) :=
  KimiK3.Vision.spliceClip ph h' w' (expandPlaceholders ph ids [h' * w'])
    (spliceClip_placeholders ph ms hwf hOne ids hTok h' w')

end KimiK3.Training.ChatTemplate

end
