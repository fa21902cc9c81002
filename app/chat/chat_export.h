// The chat's /export FILE.md|FILE.json: the whole chat as shown - every finished turn, /resets
// included - for reading or for other tools. Unlike /save (a transcript that replays token for
// token) it keeps no token ids or run options.
//
// Markdown (.md, .markdown):
//   # TITLE                           ("# wormchat chat" when the chat has no title)
//   (blank)
//   - model: MODEL
//   - settings: temperature 0.9, top-k 5, top-p 0.9, seed 42, max tokens 256
//                                     (then ", beams W" when replies are by beam search, with
//                                     ", length penalty X" and ", early stopping" if set)
//   - speculation: prompt lookup, k 8, n-grams up to 3
//                                     only when the chat decodes with speculation (as at export)
//   ### System                        the system prompt verbatim, only if there is one
//   ### You / ### wormchat            each turn: the user's text, then the reply, verbatim (both
//                                     are markdown already); "*(no reply)*" for an empty reply
//   ---, *(new conversation)*         before a turn with reset_before (the model forgot what came
//                                     before it)
//   *(settings from here: ...)*       before a turn that ran with other settings than the one
//                                     before it (only what changed); a changed system prompt is a
//                                     new "### System" section ("*(no system prompt from here)*")
// Every heading, marker and text is followed by a blank line (the last by just its newline); the
// bytes of texts are kept as they are (invalid UTF-8 too).
//
// JSON (.json), OpenAI-style, 2-space indented, UTF-8 (invalid bytes become U+FFFD):
//   {"model": MODEL, "title": TITLE ("" when none),
//    "settings": {"temperature", "top_k", "top_p", "seed", "max_tokens"
//                 (, "beams": {"num_beams", "length_penalty", "early_stopping"} with beam search)},
//    ("speculation": {"mode": "lookup", "k", "lookup_ngram"} or {"mode": "draft", "k",
//     "draft_model"} when the chat speculates,)
//    "messages": [{"role": "system", "content": ...} (if there is a system prompt),
//                 {"role": "user", "content": ...}, {"role": "assistant", "content": ...}, ...]}
// All turns are in "messages", as the chat shows them. Two extra keys mark what Markdown marks: a
// user message after a /reset has "new_conversation": true, and one whose turn ran with other
// settings than the turn before has "settings": {...} (all of them, as above); a changed system
// prompt is a new system message before it. Strip those keys to send the messages to an API.
#pragma once

#include <string>
#include <vector>

#include "serving/conversation.h"

namespace wc {

struct ExportContent {
  std::string model;  // as the chat names it: "default" or the --model directory
  std::string title;  // "" when the chat has none
  // The settings shown at the top: the first turn's (the chat's current ones before any turn).
  ConversationSettings settings;
  // Speculative decoding as the chat runs it at export (how its replies decode, not which tokens):
  // speculate_k 0 is off, else up to speculate_k tokens proposed by `speculate_mode`: "lookup"
  // (n-grams of up to lookup_ngram) or "draft" (the checkpoint in draft_model).
  int speculate_k = 0, lookup_ngram = 3;
  std::string speculate_mode = "lookup", draft_model;
  // The turns in order; only finished ones are exported (a reply still running is not).
  // Read: user, reply_text, settings, reset_before.
  std::vector<ConversationTurn> turns;
};

enum class ExportFormat { kUnknown, kMarkdown, kJson };

// By the extension, case-insensitively: .md and .markdown are Markdown, .json is JSON.
ExportFormat ExportFormatOf(const std::string& path);

// The file's text in each format (the layouts above).
std::string ExportMarkdown(const ExportContent& c);
std::string ExportJson(const ExportContent& c);

// /export FILE (force: /export! FILE). Writes `c` to `path` ("~/" expanded) in the format its
// extension picks, atomically (a temporary file in the same directory, fsync, rename): an
// existing file is refused unless `force`, and a failed write leaves it as it was. Returns the
// line to show - "exported 6 turns to FILE (Markdown)" - or one line starting "not exported: "
// that names FILE and why: an extension other than .md/.markdown/.json, the file exists (and
// /export! overwrites it), it is a directory, its directory is missing, or the OS's reason the
// write failed. Never creates directories; never throws for a file problem.
std::string ExportChat(const std::string& path, bool force, const ExportContent& c);

}  // namespace wc
