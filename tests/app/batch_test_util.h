// Helpers of the `wormchat batch` end-to-end tests (batch_test.cpp, batch_resume_test.cpp):
// request lines, reading records, running batch and generate, and runs shared between tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/sanitized.h"
#include "tests/test_util.h"

namespace wc::test {

using json = nlohmann::json;

// One OpenAI Batch API request line: /v1/completions with `prompt`, /v1/chat/completions with
// `messages`; `body` holds the other body fields.
json Completion(const std::string& id, const std::string& prompt, json body = json::object());
json Chat(const std::string& id, const json& messages, json body = json::object());
json User(const std::string& content);  // {"role": "user", "content": ...}
std::string Jsonl(const std::vector<json>& lines);

std::vector<std::string> Lines(const std::string& text);
std::vector<std::string> SortedLines(const std::string& text);
// The output's records by id; fails the test on a line that is not JSON or a repeated id.
std::map<std::string, json> Records(const std::string& text);
// A record's generated text (text_completion or chat.completion).
std::string Text(const json& record);

// Runs `wormchat batch -i IN -o OUT args...` with `input` written to IN (in `dir`).
RunResult Batch(const TempDir& dir, const std::string& input, const std::string& out,
                const std::vector<std::string>& args = {});
// What `generate` prints for the prompt, without its final newline.
std::string Generate(const std::string& prompt, uint64_t seed, int n,
                     const std::vector<std::string>& args = {});
// The documented seed of a request without one, re-derived from the --help text:
// splitmix64(fnv1a64(custom_id) ^ --seed).
uint64_t DerivedSeed(uint64_t seed, const std::string& custom_id);

// Six completions and chats with explicit seeds and sampling fields (c1..c6; c3, c4, c6 chats).
std::string MixedInput();
// One uninterrupted run of MixedInput with -n 12 (out: the records; err: its stderr), run once.
const RunResult& MixedRun();

// 48 plain-text prompts (16 in a sanitizer build, where each takes 5x longer), run with LongArgs()
// (-n 16 on 2 user rows): long enough to kill mid-run.
constexpr size_t kLongCount = kSanitized ? 16 : 48;
std::string LongInput();
std::vector<std::string> LongArgs();
// The records of one uninterrupted run of LongInput, run once.
const std::string& LongReference();

}  // namespace wc::test
