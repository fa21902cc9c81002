// The text of the chat's status bar (above the input line) and title bar, built from plain figures
// for a given width. No terminal: the front end draws the strings (and pads them with its bar
// colour).
//
// Status bar, fields in order, separated by " | ":
//   state      "idle", "prefill 45%" ("prefill" when the share is unknown: a server's) or
//              "generating"
//   speed      "23.4 tok/s": decode speed of the reply streaming, or of the last one after it ends
//              ("- tok/s" before the first reply)
//   per step   "2.4 tok/step": with speculative decoding, tokens per decode step of that reply (1
//              plus the proposals accepted per step; shown only when speculating)
//   ttft       "ttft 412 ms" (or "ttft 1.25 s"): time to first token of that reply
//   context    "ctx 812/2048": tokens in the conversation's context / the context size
//   reused     "reused 448": prompt tokens of that reply whose K/V came from the prefix cache
//              (shown only when > 0)
//   kv         "kv 40% 12.5 MiB": KV cache fill (blocks used of the pool, or context used) and the
//              bytes it holds
//   mesh       "mesh 85.2 us/tok": emulated Wormhole mesh attention time per generated token
//   server     a chat with a server that does not send these figures: what it cannot show, e.g.
//              "kv, mesh: not from this server" (where kv and mesh would be; dropped first)
//   unsaved    "not saved: No space left on device" (shown only then; "not saved" when narrow)
//   seed       "seed 42"
// A field whose figure is unknown (negative) is left out. When the line is wider than the width,
// fields go in this order until it fits: mesh, kv, reused, per step, ttft, context; then the rest
// are abbreviated (separators become one space, then "gen"/"pf 45%", "23.4t/s", "s42"); then the
// line is cut at the width. So at 80 columns the state, "N tok/s" and "seed N" always show in full,
// and down to 40 columns the three always show (abbreviated only for huge seeds or speeds). The
// result never exceeds the width (in display columns).
#pragma once

#include <cstdint>
#include <string>

namespace wc::tui {

enum class ChatState { kIdle, kPrefill, kGenerating };

struct StatusFigures {
  ChatState state = ChatState::kIdle;
  int prefill_percent = 0;      // kPrefill: share of the prompt prefilled, 0-100; < 0: unknown
  double tokens_per_s = -1;     // decode tokens/s of the current or last reply; < 0: none yet
  double tokens_per_step = -1;  // speculating: tokens per decode step of that reply; < 0: none
  double ttft_ms = -1;          // time to first token of that reply, ms; < 0: unknown
  int64_t ctx_tokens = -1;      // tokens in the context; < 0: unknown
  int64_t ctx_size = 0;         // the context size (--ctx)
  int64_t reused_tokens = 0;    // prompt tokens that reply took from the prefix cache; 0: none
  double kv_fill = -1;          // KV cache fill, 0-1; < 0: unknown
  int64_t kv_bytes = -1;        // bytes the KV cache holds for this chat; < 0: unknown
  double mesh_us_per_tok = -1;  // emulated whole-model microseconds per token; < 0: unknown
  bool mesh_estimated = false;  // that figure is an estimate (no tt-metal program of the model)
  std::string unavailable;      // "server" above ("" for none)
  uint64_t seed = 0;
  std::string unsaved;  // "not saved: why" when the chat file could not be written; "" otherwise
  // A passing message after the state (e.g. "copied code block 1 (52 bytes) by OSC 52"); dropped
  // after the other optional fields when the line is too wide; "" for none.
  std::string note;
};

std::string StatusLine(const StatusFigures& f, int width);

struct TitleInfo {
  std::string model;      // model name (its directory's last component)
  int64_t n_params = -1;  // parameters; < 0: unknown
  std::string dtype;      // weight dtype, e.g. "bf16"
  std::string kv_format;  // e.g. "int8", "bf16 paged/64"
  std::string mesh;       // e.g. "n150", "t3k"
};

// "wormchat | falcon-7b | 7.2B | bf16 | kv int8 | mesh n300" (unknown fields left out). When too
// wide: the mesh, the kv format, the dtype, the parameter count and "wormchat" go in that order;
// then the model name is cut with "…". Never exceeds the width.
std::string TitleLine(const TitleInfo& t, int width);

// 1234 -> "1.2K", 1100048384 -> "1.1B", 40e9 -> "40B": one decimal below 10, none above.
std::string FormatCount(int64_t n);
// 512 -> "512 B", 12.5 MiB -> "12.5 MiB": 1024-based, one decimal below 100 of a unit.
std::string FormatBytes(int64_t bytes);

}  // namespace wc::tui
