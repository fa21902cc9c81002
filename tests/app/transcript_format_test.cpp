// The transcript format (serving/transcript.h) and the turns file (serving/turns_file.h):
// what is written reads back the same, and every malformed line is an error naming file:line.
#include <string>

#include <gtest/gtest.h>

#include "serving/transcript.h"
#include "serving/turns_file.h"
#include "util/error.h"

namespace wc {
namespace {

ConversationTurn Turn(const std::string& user, const std::string& reply, std::vector<int> ids,
                      StopReason reason) {
  ConversationTurn t;
  t.user = user;
  t.reply_text = reply;
  t.reply_ids = std::move(ids);
  t.reason = reason;
  t.finished = true;
  return t;
}

Transcript Sample() {
  Transcript t;
  t.version = "0.1.0";
  t.model = "default";
  t.fingerprint = "00112233445566778899aabbccddeeff";
  t.run = {{"kv-dtype", "int8", 0}, {"ctx", "96", 0}};
  t.settings.sampling.temperature = 0.9f;
  t.settings.seed = 42;
  t.settings.max_new_tokens = 24;
  t.settings.system = "Be brief.\n\"Quoted\".";
  ConversationTurn a = Turn("What is a falcon?", "A bird.", {300, 2}, StopReason::kEos);
  a.settings = t.settings;
  ConversationTurn b =
      Turn("Two lines:\n\nthe second after a blank one.", "", {2}, StopReason::kEos);
  b.settings = t.settings;
  b.settings.sampling.temperature = 0.5f;
  b.settings.beams = BeamParams{};
  b.settings.beams->num_beams = 3;
  b.settings.beams->length_penalty = 0.5f;
  b.reset_before = true;
  ConversationTurn c =
      Turn("Go on.", "Line one\n< not a marker\n", {5, 6, 7}, StopReason::kCancelled);
  c.settings = b.settings;
  c.settings.beams.reset();
  c.settings.seed = 18446744073709551615ull;  // a /retry's seed may take all 64 bits
  c.dropped_before = 1;
  t.turns = {a, b, c};
  return t;
}

void ExpectSameTurns(const Transcript& a, const Transcript& b) {
  ASSERT_EQ(a.turns.size(), b.turns.size());
  for (size_t i = 0; i < a.turns.size(); ++i) {
    const ConversationTurn &x = a.turns[i], &y = b.turns[i];
    EXPECT_EQ(x.user, y.user) << i;
    EXPECT_EQ(x.reply_text, y.reply_text) << i;
    EXPECT_EQ(x.reply_ids, y.reply_ids) << i;
    EXPECT_EQ(x.reason, y.reason) << i;
    EXPECT_EQ(x.reset_before, y.reset_before) << i;
    EXPECT_EQ(x.dropped_before, y.dropped_before) << i;
    EXPECT_TRUE(x.settings == y.settings) << i;
  }
}

TEST(TranscriptFormat, WhatIsWrittenReadsBackTheSame) {
  const Transcript t = Sample();
  const std::string text = FormatTranscript(t);
  const Transcript back = ParseTranscript(text, "t.txt");
  EXPECT_EQ(back.version, t.version);
  EXPECT_EQ(back.model, t.model);
  EXPECT_EQ(back.fingerprint, t.fingerprint);
  EXPECT_EQ(back.fingerprint_line, 4);
  EXPECT_EQ(back.architecture, "");  // absent: written before there were two
  ASSERT_EQ(back.run.size(), 2u);
  EXPECT_EQ(back.run[1].key, "ctx");
  EXPECT_EQ(back.run[1].value, "96");
  EXPECT_TRUE(back.settings == t.settings);
  ExpectSameTurns(t, back);
  EXPECT_EQ(FormatTranscript(back), text);
  // Readable: floats as typed, only what changed before a turn, text lines marked.
  EXPECT_NE(text.find("\ntemperature: 0.9\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nsystem: \"Be brief.\\n\\\"Quoted\\\".\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("--- turn 2\nreset\nset: temperature 0.5\nset: beams 3\nset: "
                      "length-penalty 0.5\n> Two lines:\n>\n> the second"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("set: seed 18446744073709551615\nset: beams 0\n> Go on.\n< Line one\n< < not "
                      "a marker\n<\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("end: cancelled\ndropped: 1\n"), std::string::npos) << text;
}

TEST(TranscriptFormat, TheArchitectureLineReadsBackAndIsOptional) {
  Transcript t = Sample();
  t.architecture = "llama";
  const std::string text = FormatTranscript(t);
  EXPECT_NE(text.find("\nmodel: " + t.model + "\narchitecture: llama\nfingerprint: "),
            std::string::npos)
      << text;
  const Transcript back = ParseTranscript(text, "t.txt");
  EXPECT_EQ(back.architecture, "llama");
  EXPECT_EQ(back.architecture_line, 4);
  EXPECT_EQ(back.fingerprint_line, 5);
  EXPECT_EQ(FormatTranscript(back), text);
  EXPECT_TRUE(back.run.size() == t.run.size()) << "architecture is not a run option";
}

// A chat kept by `wormchat chat --server URL`: a server line instead of a fingerprint, turns
// without ids; it reads back the same. Without a server both stay required.
TEST(TranscriptFormat, AServersChatHasNoFingerprintOrIdsAndReadsBack) {
  Transcript t = Sample();
  t.fingerprint.clear();
  t.run.clear();
  t.server = "http://127.0.0.1:8080";
  t.model = "falcon3-7b";
  for (ConversationTurn& turn : t.turns) turn.reply_ids.clear();
  const std::string text = FormatTranscript(t);
  EXPECT_NE(text.find("\nmodel: falcon3-7b\nserver: http://127.0.0.1:8080\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("fingerprint:"), std::string::npos) << text;
  EXPECT_EQ(text.find("ids:"), std::string::npos) << text;
  const Transcript back = ParseTranscript(text, "t.txt");
  EXPECT_EQ(back.server, t.server);
  EXPECT_EQ(back.server_line, 4);
  EXPECT_TRUE(back.fingerprint.empty());
  ExpectSameTurns(t, back);
  EXPECT_EQ(FormatTranscript(back), text);

  // The same file without its server line: a fingerprint and ids are required again.
  std::string local = text;
  local.erase(local.find("server: "), std::string("server: http://127.0.0.1:8080\n").size());
  try {
    ParseTranscript(local, "t.txt");
    FAIL() << "read without a fingerprint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fingerprint"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ParseTranscript("wormchat: 1\nmodel: m\nserver:\n", "t.txt"), Error);
}

// A reply with no tokens (cancelled before its first, or max-new-tokens 0) is written "ids:" and
// reads back (the fuzzer found it refused).
TEST(TranscriptFormat, AReplyWithNoTokensReadsBack) {
  Transcript t = Sample();
  t.turns.front().reply_ids.clear();
  t.turns.front().reply_text.clear();
  const std::string text = FormatTranscript(t);
  EXPECT_NE(text.find("\nids:\nend: "), std::string::npos) << text;
  const Transcript back = ParseTranscript(text, "t.txt");
  ExpectSameTurns(t, back);
  EXPECT_EQ(FormatTranscript(back), text);
}

TEST(TranscriptFormat, FloatsAreTheShortestThatReadBack) {
  EXPECT_EQ(FormatFloat(0.9f), "0.9");
  EXPECT_EQ(FormatFloat(1.0f), "1");
  EXPECT_EQ(FormatFloat(0.0f), "0");
  const float odd = 0.123456789f;
  EXPECT_EQ(std::stof(FormatFloat(odd)), odd);
}

// Replaces the first line that starts with `prefix` by `line` ("" deletes it).
std::string Edit(std::string text, const std::string& prefix, const std::string& line) {
  const size_t at = text.find("\n" + prefix) + 1;
  const size_t end = text.find('\n', at);
  return text.replace(at, end - at + 1, line.empty() ? "" : line + "\n");
}

std::string ErrorOf(const std::string& text) {
  try {
    ParseTranscript(text, "t.txt");
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed)";
}

TEST(TranscriptFormat, MalformedLinesNameFileAndLine) {
  const std::string good = FormatTranscript(Sample());
  ASSERT_EQ(ErrorOf(good), "(parsed)");
  struct Case {
    std::string prefix, line, error;
  };
  const std::vector<Case> cases = {
      {"kv-dtype:", "kv-dtype int8", "t.txt:5: expected 'key: value'"},
      {"seed:", "seed: many", "t.txt:10: seed must be a whole number in [0, 2^64), got many"},
      {"seed:", "seed: 18446744073709551616",
       "t.txt:10: seed must be a whole number in [0, 2^64), got 18446744073709551616"},
      {"seed:", "seed: -1", "t.txt:10: seed must be a whole number in [0, 2^64), got -1"},
      {"top-k:", "top-k: 5\ntop-k: 6", "t.txt:9: 'top-k:' is repeated"},
      {"temperature:", "temperature: -1", "t.txt:7: "},
      {"fingerprint:", "", "the header has no 'fingerprint:' line"},
      {"model:", "model: ", "t.txt:3: 'model:' needs `default`"},
      {"max-new-tokens:", "", "the header has no 'max-new-tokens:' line"},
      {"--- turn 2", "--- turn 3", "expected '--- turn 2'"},
      {"ids: 300", "ids: 300 x", "ids: 'x' is not an integer"},
      {"end: eos", "end: maybe", "'maybe' is not one of eos"},
      {"end: eos", "", "turn 1 has no 'end:' line"},
      {"> What is", "What is a falcon?", "expected '> ', '< ', 'ids:'"},
      {"> What is", ">What is a falcon?", "a text line is '> ' + text"},
      {"set: temperature", "set: temperature -1",
       "temperature must be a number >= 0 (0 = greedy), got -1"},
      {"set: temperature", "set: color blue", "'color' is not a setting"},
      {"dropped: 1", "dropped: 9", "dropped: 9 is not a count of earlier turns"},
  };
  for (const Case& c : cases) {
    const std::string text = Edit(good, c.prefix, c.line);
    const std::string error = ErrorOf(text);
    EXPECT_NE(error.find(c.error), std::string::npos) << c.line << " gave: " << error << "\n"
                                                      << text;
    EXPECT_EQ(error.rfind("t.txt:", 0), 0u) << error;
  }
  // A '<' line before the user message, a 'reset' after it.
  EXPECT_NE(ErrorOf(Edit(good, "> What is", "< early\n> What is a falcon?")).find("t.txt:16: "),
            std::string::npos);
  EXPECT_NE(ErrorOf(Edit(good, "< A bird.", "reset")).find("'reset' must come before"),
            std::string::npos);
}

TEST(TranscriptFormat, SettingsByKey) {
  ConversationSettings s;
  ApplySetting(s, "system", "plain text");
  EXPECT_EQ(s.system, "plain text");
  ApplySetting(s, "system", "\"json\\ntext\"");
  EXPECT_EQ(s.system, "json\ntext");
  EXPECT_THROW(ApplySetting(s, "length-penalty", "2"), Error) << "needs beams first";
  ApplySetting(s, "beams", "4");
  ApplySetting(s, "early-stopping", "true");
  ASSERT_TRUE(s.beams.has_value());
  EXPECT_EQ(s.beams->num_beams, 4);
  EXPECT_TRUE(s.beams->early_stopping);
  EXPECT_THROW(ApplySetting(s, "beams", "17"), Error);
  EXPECT_THROW(ApplySetting(s, "max-new-tokens", "0"), Error);
  EXPECT_THROW(ApplySetting(s, "early-stopping", "yes"), Error);
  ApplySetting(s, "beams", "0");
  EXPECT_FALSE(s.beams.has_value());
}

TEST(TurnsFile, MessagesBlocksAndCommands) {
  const auto steps = ParseTurnsFile(
      "What is a falcon?\n\n/reset\n\"\"\"\nline one\n\n/not a command here\n\"\"\"\n/set "
      "temperature 0.5\r\nlast\n",
      "f");
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_EQ(steps[0].text, "What is a falcon?");
  EXPECT_EQ(steps[1].kind, TurnsFileStep::Kind::kReset);
  EXPECT_EQ(steps[2].kind, TurnsFileStep::Kind::kMessage);
  EXPECT_EQ(steps[2].text, "line one\n\n/not a command here");
  EXPECT_EQ(steps[2].line, 4);
  EXPECT_EQ(steps[3].kind, TurnsFileStep::Kind::kSet);
  EXPECT_EQ(steps[3].text, "temperature");
  EXPECT_EQ(steps[3].value, "0.5");
  EXPECT_EQ(steps[4].text, "last");
}

TEST(TurnsFile, ErrorsNameFileAndLine) {
  auto error = [](const std::string& text) {
    try {
      ParseTurnsFile(text, "f");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(parsed)");
  };
  EXPECT_NE(error("hi\n/quit\n").find("f:2: '/quit' is not a command"), std::string::npos);
  EXPECT_NE(error("hi\n/set temperature\n").find("f:2: expected '/set KEY VALUE'"),
            std::string::npos);
  EXPECT_NE(error("hi\n\"\"\"\nopen\n").find("f:2: this \"\"\" block is never closed"),
            std::string::npos);
  EXPECT_NE(error("\n/reset\n").find("no message"), std::string::npos);
}

}  // namespace
}  // namespace wc
