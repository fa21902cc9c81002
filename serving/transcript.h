// Transcripts (issue 14): a readable record of a conversation - everything that decides its tokens
// and every turn's expected reply - that `wormchat transcript replay` re-runs token for token. This
// file only reads and writes the format; it knows nothing of models or the command line (the run
// options stay key/value strings that app/ maps to its flags).
//
// The format, one item per line ('#' lines and blank lines are ignored outside a message):
//
//   # wormchat transcript: replay with `wormchat transcript replay FILE`
//   wormchat: 0.1.0                 the version that wrote it (informative)
//   model: default                  `default` (the model in assets/) or the --model directory
//   architecture: falcon            its architecture (model/architecture.h; absent in transcripts
//                                   written before there were two: not checked then)
//   fingerprint: 9c1e...            ModelFingerprint (model/fingerprint.h) of that model
//   server: http://host:8080        instead of a fingerprint: a chat kept by `wormchat chat
//                                   --server URL` (the model: the server's id for it); its turns
//                                   have no 'ids:' (the server sends text) and it does not replay
//   model-size: 41540768            a GGUF model's file size in bytes (absent for a directory, and
//                                   in transcripts written before: not checked then)
//   kv-dtype: bf16                  run options: one `key: value` line per flag, every one that
//   ...                             can change tokens (app/transcript/run_header.h lists them)
//   temperature: 0.9                the conversation's settings at its start: temperature, top-k,
//   ...                             top-p, seed, max-new-tokens, beams (0 = sampling; if > 0 also
//   system: "You answer briefly."   length-penalty and early-stopping), system (a JSON string)
//   --- turn 1                      turns, numbered 1, 2, ... in order
//   reset                           only if the conversation was reset (/reset) before it
//   set: temperature 0.5            settings changed before it, one per line (same keys)
//   > first line of the user text   every line of the message: "> " + line, or ">" if empty
//   < first line of the reply       every line of the reply text: "< " + line, or "<" if empty
//   ids: 300 3087 685 2             the reply's token ids (a final EOS included)
//   end: eos                        eos | stop | length | context | cancelled
//   dropped: 2                      only if the oldest turns were dropped to fit the context
//
// Values never contain a newline; text lines are kept byte for byte (no trimming).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "serving/conversation.h"

namespace wc {

// A header line the format does not interpret itself, as found (line: 1-based, 0 if built).
struct TranscriptOption {
  std::string key, value;
  int line = 0;
};

struct Transcript {
  std::string path;          // the file it was read from ("" if built), for messages
  std::string version;       // wormchat:
  std::string model;         // model:
  std::string architecture;  // architecture: ("" if absent)
  int architecture_line = 0;
  std::string fingerprint;  // fingerprint: ("" with a server)
  int fingerprint_line = 0;
  std::string server;  // server: ("" for a chat run in process)
  int server_line = 0;
  int64_t model_size = -1;  // model-size: (-1 if absent)
  int model_size_line = 0;
  std::vector<TranscriptOption> run;  // the run options, in file order
  ConversationSettings settings;      // at the start of the conversation
  // Each turn's user text, the settings it ran with, reset_before, dropped_before and its reply
  // (finished = true). turn_lines[i]: the line of turn i's "--- turn" header (0 if built).
  std::vector<ConversationTurn> turns;
  std::vector<int> turn_lines;
};

// Parses `text` read from `path`. Throws wc::Error "PATH:LINE: what is wrong" for a malformed line,
// an unknown or repeated header key, a missing required key (fingerprint only without a server),
// turns out of order, a turn without a user message, ids (but with a server) or end, or a bad
// setting.
Transcript ParseTranscript(const std::string& text, const std::string& path);
// Reads and parses `path` (wc::Error naming it if unreadable).
Transcript ReadTranscriptFile(const std::string& path);

// The file's text. Unfinished turns are not written. Throws wc::Error if a header value contains
// a newline.
std::string FormatTranscript(const Transcript& t);
// Writes FormatTranscript(t) to `path` atomically (a temporary file renamed over it). Throws
// wc::Error naming the path on failure.
void WriteTranscriptFile(const std::string& path, const Transcript& t);

// Conversation settings by their transcript keys (also the turns file's `/set KEY VALUE`):
// temperature, top-k, top-p, seed, max-new-tokens, beams (0: sampling), length-penalty,
// early-stopping (true/false), system (a JSON string, as transcripts write it, or plain
// text that does not start with a quote). Throws wc::Error "KEY: ..." for an unknown key or a bad
// value; the beam keys need beams > 0 first. The result is validated as Conversation does. (A beam
// reply's num_return does not change the conversation's tokens and is not recorded: 1 when read.)
void ApplySetting(ConversationSettings& s, const std::string& key, const std::string& value);
// The `set:` lines that turn `from` into `to`, in applying order ({} if equal).
std::vector<std::pair<std::string, std::string>> SettingChanges(const ConversationSettings& from,
                                                                const ConversationSettings& to);
// A float written as the shortest decimal that reads back to the same float.
std::string FormatFloat(float v);

}  // namespace wc
