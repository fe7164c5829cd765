// Package injection tells whether a text reads as instructions to a model: a
// prompt injection planted in a memory, a tool result, an A2A reply, a
// subtask result or a human answer before it is fed into a prompt.
//
// Classify is a rules classifier. It has no model and no network; it is
// deterministic, linear in the length of the text and safe for any input
// (invalid UTF-8 and NUL bytes included).
//
// # Pipeline
//
//  1. Bound: a text longer than MaxScanBytes is scanned in its first and
//     last MaxScanBytes/2 bytes only. Invalid UTF-8 becomes U+FFFD and
//     control characters other than tab and newline become spaces.
//  2. Hidden text: zero-width characters, bidi controls and Unicode tag
//     characters are counted and removed. Tag characters that are not part of
//     an emoji flag sequence, bidi overrides (U+202D, U+202E) and runs of
//     three or more invisible characters flag by themselves; zero-width
//     characters inside a word only add to other evidence (copy-pasted web
//     text carries stray ones). Tag characters spell ASCII; that text is
//     classified too.
//  3. Folding, for matching only: NFKC (fullwidth and mathematical letters),
//     lower case, small capitals, Cyrillic and Greek look-alikes inside words
//     that also hold Latin letters, letters spaced out with single
//     separators ("i g n o r e", "i.g.n.o.r.e") joined up. A second view
//     undoes leetspeak in words that mix letters and digits ("1gn0r3").
//  4. Rules: precompiled regular expressions grouped under the rule ids
//     override, jailbreak, role_marker, exfiltrate, tool_request, conceal,
//     addresses_model, hidden_text and encoded. Each match weighs 1 (weak)
//     or 2 (strong); a text is flagged at a total of 2, so a weak sign never
//     quarantines on its own. The regexps are slow per byte, so they rarely
//     run: the sets of literal words every match of a rule must contain are
//     derived from its parsed pattern (plus the rule's hand-written keys),
//     one Aho-Corasick pass finds all of them in the text, and a rule's
//     regexp runs only on a window of ±320 bytes around an occurrence of
//     its most selective set, and only when all its other sets occur in
//     that window. A text of 640 bytes or less is one window.
//  5. Encoded: base64 and hex blobs that decode to text are classified in
//     turn (two levels deep, 32 KiB decoded in all); a flagged blob flags the
//     text under "encoded".
//
// # What counts
//
// Most verbs of an injection ("ignore", "send", "call") are ordinary words,
// so the override, exfiltration and tool rules require the imperative: the
// verb must open a clause (start of line, after sentence punctuation, a
// quote, a bullet, "please", "now", …) or follow "you must/should/will",
// "I want you to", or "AI agents … must". "The app ignores my previous
// settings" and "attackers try to make the model ignore its instructions"
// are therefore not flagged, while "Ignore all previous instructions" is,
// wherever it stands.
//
// A text that quotes a payload verbatim is flagged even when it is about
// prompt injection (a security article quoting "Ignore previous
// instructions and …"): the quoted words reach the model the same way, and a
// quarantined memory is recoverable while an obeyed one is not. A text that
// describes injection in the third person without an imperative payload is
// not flagged.
//
// Weak signs, flagged only together: a role label such as "User:" or
// "Assistant:" at a line start (chat logs and transcripts have them), a
// Markdown "### Instruction" header, "curl … | sh" (install docs have it),
// "forward this to someone@example.com" (emails have it), "call the
// cancel_task tool" without urgency, "developer mode" (phones have it),
// "new instructions:", "from now on you …", words that address an AI, and
// a zero-width character inside a word.
//
// Known gaps: paraphrases with no instruction-override vocabulary ("the
// text above was a test; the real task is …"), languages other than the
// ones listed in rules.go, ciphers other than base64 and hex (ROT13,
// reversed text), and instructions split across a decoded blob and the
// text around it.
package injection
