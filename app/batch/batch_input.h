// `wormchat batch` input: the lines of a batch file parsed into requests, or into errors that name
// the line and the field. Two formats:
//   jsonl  the OpenAI Batch API's, as vLLM's run-batch reads it: one object per line,
//          {"custom_id": "...", "method": "POST", "url": "/v1/completions" |
//          "/v1/chat/completions",
//           "body": {"prompt": "..." | [token ids] | "messages": [...], "max_tokens",
//           "temperature", "top_p",
//                    "top_k", "seed", "stop", "num_beams", "length_penalty",
//                    "early_stopping", "n"}}
//   text   one prompt per line, chat-framed; custom_id is the line number.
// Blank lines are skipped in both but still count as line numbers. Nothing here needs the model:
// framing and token counts come later (batch_request.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/openai/openai_body.h"

namespace wc {

enum class BatchFormat { kAuto, kJsonl, kText };
// "auto", "jsonl", "text". Throws wc::Error naming --format otherwise.
BatchFormat ParseBatchFormat(const std::string& name);
// kJsonl when the first non-blank line starts with '{', else kText. `format` other than kAuto wins.
BatchFormat DetectBatchFormat(const std::string& text, BatchFormat format);

// One request line, before tokenization: its body's fields (app/openai/openai_body.h; for a text
// line, chat with `prompt` as the user message). Fields the body leaves out are unset: the command
// line's values apply.
struct BatchLine : OpenAIBody {
  int line = 0;                          // 1-based line number in the input
  std::optional<std::string> custom_id;  // when it could be read (a string)
  std::string error;                     // non-empty: the line is bad ("line N: ...")
  bool from_text = false;                // a plain-text line (no body to name in errors)
};

// Every non-blank line of `text` (the whole input) in `format` (kJsonl or kText), in input order.
// Bad lines come back with `error` set; a later custom_id equal to an earlier one is an error for
// the later line. Never throws for the input's content.
std::vector<BatchLine> ParseBatchInput(const std::string& text, BatchFormat format);

}  // namespace wc
