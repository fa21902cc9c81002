// End-to-end tests of `wormchat batch` through the real binary on the default model: input
// formats, the exact record format, results equal to `generate`, derived seeds, bad lines, stdin,
// batch invariance, a bounded KV pool, progress and usage errors. Resuming: batch_resume_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/app/batch_test_util.h"

namespace wc::test {
namespace {

TEST(BatchTest, CompletionsAndChatsEqualGenerate) {
  const RunResult& r = MixedRun();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto recs = Records(r.out);
  ASSERT_EQ(recs.size(), 6u);
  EXPECT_EQ(Text(recs.at("batch-1")), Generate("The cat", 7, 12, {"--raw"}));
  EXPECT_EQ(Text(recs.at("batch-2")),
            Generate("A dog is", 3, 10,
                     {"--raw", "--temperature", "0.7", "--top-k", "3", "--top-p", "0.8"}));
  EXPECT_EQ(Text(recs.at("batch-3")), Generate("What does it mean to sail?", 5, 12));
  EXPECT_EQ(Text(recs.at("batch-4")),
            Generate("What is a tree?", 9, 16, {"--stop", "a", "--stop", "zz"}));
  EXPECT_EQ(Text(recs.at("batch-4")).find('a'), std::string::npos);
  EXPECT_EQ(Text(recs.at("batch-5")),
            Generate("Once upon a time", 2, 12, {"--raw", "--top-k", "0", "--temperature", "0"}));
  // A conversation has no generate equivalent; it ran and its prompt holds all four messages.
  EXPECT_GT(recs.at("batch-6")["response"]["body"]["usage"]["prompt_tokens"].get<int>(), 20);
}

TEST(BatchTest, RecordFormatIsVllmRunBatchWithoutTimestamps) {
  const RunResult& r = MixedRun();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& line : Lines(r.out)) {
    EXPECT_EQ(line.find("created"), std::string::npos) << line;
    const json rec = json::parse(line);
    const std::string id = rec["id"];
    const std::string n = id.substr(6);  // "batch-N"
    ASSERT_EQ(id, "batch-" + n);
    EXPECT_EQ(rec["custom_id"], "c" + n);
    EXPECT_TRUE(rec["error"].is_null());
    EXPECT_EQ(rec["response"]["status_code"], 200);
    EXPECT_EQ(rec["response"]["request_id"], id);
    const json& body = rec["response"]["body"];
    const bool chat = n == "3" || n == "4" || n == "6";
    EXPECT_EQ(body["id"], (chat ? "chatcmpl-" : "cmpl-") + id);
    EXPECT_EQ(body["object"], chat ? "chat.completion" : "text_completion");
    EXPECT_EQ(body["model"], "default-model");
    ASSERT_EQ(body["choices"].size(), 1u);
    const json& choice = body["choices"][0];
    EXPECT_EQ(choice["index"], 0);
    if (chat) {
      EXPECT_EQ(choice["message"]["role"], "assistant");
      EXPECT_TRUE(choice["message"]["content"].is_string());
      EXPECT_FALSE(choice.contains("text"));
    } else {
      EXPECT_TRUE(choice["text"].is_string());
      EXPECT_TRUE(choice.contains("logprobs") && choice["logprobs"].is_null());
    }
    const json& usage = body["usage"];
    const int completion = usage["completion_tokens"];
    const int max_tokens = n == "2" ? 10 : n == "4" ? 16 : 12;
    EXPECT_LE(completion, max_tokens);
    EXPECT_EQ(usage["total_tokens"].get<int>(),
              usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
    // "length" exactly when the reply used every token it was allowed.
    EXPECT_EQ(choice["finish_reason"], completion == max_tokens ? "length" : "stop") << line;
  }
  // Keys in run-batch's order, byte for byte.
  const auto recs = Records(r.out);
  bool found = false;
  for (const std::string& line : Lines(r.out)) {
    if (line.rfind("{\"id\":\"batch-1\"", 0) != 0) continue;
    found = true;
    EXPECT_EQ(
        line.rfind("{\"id\":\"batch-1\",\"custom_id\":\"c1\",\"response\":{\"status_code\":200,"
                   "\"request_id\":\"batch-1\",\"body\":{\"id\":\"cmpl-batch-1\",\"object\":"
                   "\"text_completion\",\"model\":\"default-model\",\"choices\":[{\"index\":0,"
                   "\"text\":",
                   0),
        0u)
        << line;
    EXPECT_NE(line.find("\"usage\":{\"prompt_tokens\":"), std::string::npos);
    const std::string tail = "}}},\"error\":null}";
    EXPECT_EQ(line.substr(line.size() - tail.size()), tail) << line;
  }
  EXPECT_TRUE(found);
  // "The cat" fed raw: [bos] + its tokens.
  const RunResult tok = RunWormchat({"tokenize", "--text", "The cat"});
  std::istringstream ids(tok.out);
  int count = 0;
  for (int id; ids >> id;) ++count;
  EXPECT_EQ(recs.at("batch-1")["response"]["body"]["usage"]["prompt_tokens"].get<int>(), count + 1);
}

TEST(BatchTest, PlainTextIsChatFramedWithStableDerivedSeeds) {
  TempDir dir;
  const std::string input = "What is a cat?\n\n   \nWhat does it mean to sail?\n";
  const RunResult r = Batch(dir, input, dir.File("a.jsonl"), {"-n", "10", "--seed", "42"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto recs = Records(ReadFile(dir.File("a.jsonl")));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs.at("batch-1")["custom_id"], "1");
  EXPECT_EQ(recs.at("batch-4")["custom_id"], "4");  // blank lines still count
  EXPECT_EQ(recs.at("batch-1")["response"]["body"]["object"], "chat.completion");
  EXPECT_EQ(Text(recs.at("batch-1")), Generate("What is a cat?", DerivedSeed(42, "1"), 10));
  EXPECT_EQ(Text(recs.at("batch-4")),
            Generate("What does it mean to sail?", DerivedSeed(42, "4"), 10));
  // A JSONL request without a seed derives it from its custom_id the same way.
  const RunResult j =
      Batch(dir, Jsonl({Completion("my-id", "The ship")}), dir.File("j.jsonl"), {"-n", "10"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(Text(Records(ReadFile(dir.File("j.jsonl"))).at("batch-1")),
            Generate("The ship", DerivedSeed(0, "my-id"), 10, {"--raw"}));
  // The same run again gives the same bytes.
  const RunResult again = Batch(dir, input, dir.File("b.jsonl"), {"-n", "10", "--seed", "42"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("a.jsonl"))), SortedLines(ReadFile(dir.File("b.jsonl"))));
}

TEST(BatchTest, FormatDetectionAndForcing) {
  TempDir dir;
  // Leading blank lines do not hide the JSONL.
  const RunResult j = Batch(dir, "\n\n" + Jsonl({Completion("a", "The cat", {{"seed", 1}})}),
                            dir.File("j.jsonl"), {"-n", "4", "--quiet"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(Records(ReadFile(dir.File("j.jsonl"))).at("batch-3")["custom_id"], "a");
  // --format text takes the same line as a prompt.
  const RunResult t = Batch(dir, Jsonl({Completion("a", "The cat")}), dir.File("t.jsonl"),
                            {"-n", "4", "--quiet", "--format", "text"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto recs = Records(ReadFile(dir.File("t.jsonl")));
  EXPECT_EQ(recs.at("batch-1")["custom_id"], "1");
  EXPECT_EQ(recs.at("batch-1")["response"]["body"]["object"], "chat.completion");
  // --format jsonl on plain text: each line is a bad line.
  const RunResult bad =
      Batch(dir, "hello\n", dir.File("b.jsonl"), {"-n", "4", "--quiet", "--format", "jsonl"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(Records(ReadFile(dir.File("b.jsonl"))).at("batch-1")["error"]["message"],
            "line 1: not valid JSON (syntax error at byte 1)");
  const RunResult wrong = Batch(dir, "hello\n", dir.File("w.jsonl"), {"--format", "csv"});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("--format 'csv'"), std::string::npos) << wrong.err;
}

TEST(BatchTest, BadLinesGetErrorRecordsAndTheOthersRun) {
  const std::string long_prompt = [] {
    std::string s;
    for (int i = 0; i < 700; ++i) s += "word ";
    return s;
  }();
  std::vector<std::string> lines = {
      Completion("good1", "The cat", {{"seed", 1}}).dump(),                         // 1
      R"({"custom_id": "x2", "method": "POST", )",                                  // 2
      R"({"method": "POST", "url": "/v1/completions", "body": {"prompt": "hi"}})",  // 3
      Completion("x4", "hi", {{"max_tokens", "ten"}}).dump(),                       // 4
      Completion("x5", "hi", {{"temperature", -1}}).dump(),                         // 5
      Completion("x6", "hi", {{"top_p", 2}}).dump(),                                // 6
      Chat("x7", "hi").dump(),                                                      // 7
      Chat("x8", json::array({{{"role", "tool"}, {"content", "hi"}}})).dump(),      // 8
      Chat("x9", json::array({User("hi"), {{"role", "assistant"}, {"content", "yo"}}}))
          .dump(),                                                                        // 9
      R"({"custom_id": "x10", "method": "POST", "url": "/v1/embeddings", "body": {}})",   // 10
      R"({"custom_id": "x11", "method": "GET", "url": "/v1/completions", "body": {}})",   // 11
      R"({"custom_id": "x12", "method": "POST", "url": "/v1/completions", "body": {}})",  // 12
      Completion("x13", long_prompt).dump(),                                              // 13
      Completion("good1", "again").dump(),                                                // 14
      "",                                                                                 // 15
      Completion("x16", "").dump(),                                                       // 16
      "[1, 2]",                                                                           // 17
      Chat("good18", json::array({User("What is a cat?")}), {{"seed", 2}}).dump(),        // 18
      Completion("x19", "hi", {{"seed", -3}}).dump(),                                     // 19
      Completion("x20", "hi", {{"stop", 5}}).dump(),                                      // 20
  };
  std::string input;
  for (const std::string& l : lines) input += l + "\n";
  TempDir dir;
  const RunResult r = Batch(dir, input, dir.File("out.jsonl"), {"-n", "6"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("wormchat: error: 17 of 19 requests failed"), std::string::npos) << r.err;
  const std::string out = ReadFile(dir.File("out.jsonl"));
  const auto recs = Records(out);
  ASSERT_EQ(recs.size(), 19u);
  for (const char* id : {"batch-1", "batch-18"}) {
    EXPECT_TRUE(recs.at(id)["error"].is_null()) << id;
    EXPECT_EQ(recs.at(id)["response"]["status_code"], 200) << id;
  }
  const std::map<int, std::string> expected = {
      {2, "line 2: not valid JSON"},
      {3, "line 3: custom_id is missing"},
      {4,
       "line 4: body.max_tokens must be a whole number >= 0 (0 = only read the prompt), "
       "got \"ten\""},
      {5, "line 5: body.temperature must be a number >= 0 (0 = greedy), got -1"},
      {6, "line 6: body.top_p must be a number in (0, 1] (1 = off), got 2"},
      {7, "line 7: body.messages must be an array of {role, content} objects, got \"hi\""},
      {8, "line 8: body.messages[0].role must be system, user or assistant, got 'tool'"},
      {9, "line 9: body.messages[1].role must be user"},
      {10, "line 10: url must be /v1/completions or /v1/chat/completions, got '/v1/embeddings'"},
      {11, "line 11: method must be POST, got 'GET'"},
      {12, "line 12: body.prompt is missing"},
      {13, "line 13: body.prompt is "},
      {14, "line 14: custom_id 'good1' duplicates line 1"},
      {16, "line 16: body.prompt is empty"},
      {17, "line 17: expected a JSON object"},
      {19, "line 19: body.seed must be a whole number in [0, 2^64), got -3"},
      {20, "line 20: body.stop must be a string or a list of strings, got 5"},
  };
  for (const auto& [line, message] : expected) {
    const json& rec = recs.at("batch-" + std::to_string(line));
    EXPECT_TRUE(rec["response"].is_null()) << line;
    EXPECT_EQ(rec["error"]["code"], "invalid_request") << line;
    const std::string got = rec["error"]["message"];
    EXPECT_EQ(got.rfind(message, 0), 0u) << "line " << line << ": " << got;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
    const bool readable_id = line != 2 && line != 3 && line != 17;
    if (readable_id)
      EXPECT_EQ(rec["custom_id"], line == 14 ? "good1" : "x" + std::to_string(line));
    else
      EXPECT_TRUE(rec["custom_id"].is_null()) << line;
  }
  EXPECT_EQ(recs.at("batch-5")["error"]["message"],
            "line 5: body.temperature must be a number >= 0 (0 = greedy), got -1");
  const std::string too_long = recs.at("batch-13")["error"]["message"];
  EXPECT_NE(too_long.find("tokens, too long for the context of 512 tokens"), std::string::npos)
      << too_long;
  // The good lines are what they would be alone.
  EXPECT_EQ(Text(recs.at("batch-1")), Generate("The cat", 1, 6, {"--raw"}));
  // A rerun finds every record, bad ones included: nothing is added, and it still fails.
  const RunResult again = Batch(dir, input, dir.File("out.jsonl"), {"-n", "6"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(ReadFile(dir.File("out.jsonl")), out);
}

TEST(BatchTest, ReadsStdin) {
  const RunResult& file_run = MixedRun();
  TempDir dir;
  const RunResult r =
      RunWormchat({"batch", "-i", "-", "-o", dir.File("out.jsonl"), "-n", "12"}, MixedInput());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("out.jsonl"))), SortedLines(file_run.out));
}

TEST(BatchTest, RecordsDoNotDependOnUserRowsBatchTokensOrThreads) {
  const RunResult& base = MixedRun();
  ASSERT_EQ(base.exit_code, 0) << base.err;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--user-rows", "1"},
        {"--max-batch-tokens", "1"},
        {"--user-rows", "3", "--max-batch-tokens", "5", "--threads", "1"}}) {
    TempDir dir;
    std::vector<std::string> args = {"-n", "12", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = Batch(dir, MixedInput(), dir.File("out.jsonl"), args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(SortedLines(ReadFile(dir.File("out.jsonl"))), SortedLines(base.out))
        << extra[0] << " " << extra[1];
  }
}

TEST(BatchTest, BoundedKVPoolGivesTheSameRecordsAndItsRejectionsAreErrorRecords) {
  const RunResult& base = MixedRun();
  ASSERT_EQ(base.exit_code, 0) << base.err;
  TempDir dir;
  // One 64-token block: one request at a time.
  const RunResult r =
      Batch(dir, MixedInput(), dir.File("out.jsonl"), {"-n", "12", "--quiet", "--kv-blocks", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("out.jsonl"))), SortedLines(base.out));
  // A request that can never fit the pool is rejected by the loop: an error record, the rest run.
  const std::string input =
      Jsonl({Completion("big", "The cat", {{"max_tokens", 200}}), Completion("ok", "The cat")});
  const RunResult big =
      Batch(dir, input, dir.File("big.jsonl"), {"-n", "8", "--quiet", "--kv-blocks", "2"});
  EXPECT_EQ(big.exit_code, 1) << big.err;
  const auto recs = Records(ReadFile(dir.File("big.jsonl")));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs.at("batch-1")["custom_id"], "big");
  EXPECT_EQ(recs.at("batch-1")["error"]["code"], "invalid_request");
  const std::string message = recs.at("batch-1")["error"]["message"];
  EXPECT_EQ(message.rfind("line 1: ", 0), 0u) << message;
  EXPECT_NE(message.find("KV blocks"), std::string::npos) << message;
  EXPECT_TRUE(recs.at("batch-2")["error"].is_null());
}

TEST(BatchTest, ProgressIsPlainLinesOffATerminalAndQuietSilencesIt) {
  const RunResult& r = MixedRun();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  const std::vector<std::string> lines = Lines(r.err);
  ASSERT_GE(lines.size(), 2u) << r.err;
  for (const std::string& l : lines) EXPECT_EQ(l.rfind("batch: ", 0), 0u) << l;
  EXPECT_NE(lines.front().find("6 requests (jsonl)"), std::string::npos) << r.err;
  EXPECT_NE(lines.back().find("6/6 done (0 failed"), std::string::npos) << r.err;
  TempDir dir;
  const RunResult quiet = Batch(dir, MixedInput(), dir.File("out.jsonl"), {"-n", "12", "--quiet"});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(quiet.out, "");
}

TEST(BatchTest, MissingInputOrOutputDirectoryIsAOneLineError) {
  TempDir dir;
  const RunResult in = RunWormchat({"batch", "-i", dir.File("nope.jsonl"), "-o", dir.File("o")});
  EXPECT_EQ(in.exit_code, 1);
  EXPECT_EQ(in.err.rfind("wormchat: error: -i " + dir.File("nope.jsonl") + ": cannot read", 0), 0u)
      << in.err;
  EXPECT_EQ(CountLines(in.err), 1) << in.err;
  WriteFile(dir.File("in.txt"), "hello\n");
  const std::string out = dir.File("no/such/dir/out.jsonl");
  const RunResult o = RunWormchat({"batch", "-i", dir.File("in.txt"), "-o", out});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.err.rfind("wormchat: error: -o " + out + ": cannot open for writing", 0), 0u)
      << o.err;
  EXPECT_NE(o.err.find("does its directory exist?"), std::string::npos) << o.err;
  EXPECT_EQ(CountLines(o.err), 1) << o.err;
  EXPECT_NE(RunWormchat({"batch", "--help"}).out.find("splitmix64"), std::string::npos);
}

// The prefix cache in the records: requests that share a long head, run one after another, take
// its full blocks from the cache (usage.prompt_tokens_details.cached_tokens, whole 64-token
// blocks); with --prefix-cache off every count is 0; everything else in the records is identical.
TEST(BatchTest, CachedTokensAreReportedAndChangeNothingElse) {
  TempDir dir;
  std::string head;
  for (int i = 0; i < 12; ++i) head += "The ship sails north along the cold grey coast. ";
  std::string input;
  for (const char* q : {"Where does it go?", "Who is on board?", "When will it arrive?"})
    input += head + q + "\n";
  const std::vector<std::string> common = {"-n", "6", "--seed", "3", "--user-rows", "1"};
  const RunResult on = Batch(dir, input, dir.File("on.jsonl"), common);
  ASSERT_EQ(on.exit_code, 0) << on.err;
  std::vector<std::string> off_args = common;
  off_args.insert(off_args.end(), {"--prefix-cache", "off"});
  const RunResult off = Batch(dir, input, dir.File("off.jsonl"), off_args);
  ASSERT_EQ(off.exit_code, 0) << off.err;
  auto on_recs = Records(ReadFile(dir.File("on.jsonl")));
  auto off_recs = Records(ReadFile(dir.File("off.jsonl")));
  ASSERT_EQ(on_recs.size(), 3u);
  for (auto& [id, rec] : on_recs) {
    json& usage = rec["response"]["body"]["usage"];
    json& off_usage = off_recs.at(id)["response"]["body"]["usage"];
    const int cached = usage["prompt_tokens_details"]["cached_tokens"];
    EXPECT_EQ(off_usage["prompt_tokens_details"]["cached_tokens"], 0) << id;
    EXPECT_EQ(cached % 64, 0) << id;
    EXPECT_LT(cached, usage["prompt_tokens"].get<int>()) << id;
    if (id != "batch-1") {
      EXPECT_GE(cached, 64) << id;  // the head is more than a block
    }
    usage.erase("prompt_tokens_details");
    off_usage.erase("prompt_tokens_details");
    EXPECT_EQ(rec, off_recs.at(id)) << id;
  }
  const RunResult bad = Batch(dir, input, dir.File("x.jsonl"), {"--prefix-cache", "maybe"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--prefix-cache 'maybe' is not supported; choose on or off"),
            std::string::npos)
      << bad.err;
}

// --prefix-cache-dir: the second run of the same batch maps the shared head's blocks in from the
// files the first wrote (even its first request, which computed them the first time); the records
// are identical but for usage.prompt_tokens_details. Bad settings are one-line errors at start.
TEST(BatchTest, APersistedPrefixCacheServesTheNextRun) {
  TempDir dir;
  std::string head;
  for (int i = 0; i < 12; ++i) head += "The ship sails north along the cold grey coast. ";
  std::string input;
  for (const char* q : {"Where does it go?", "Who is on board?"}) input += head + q + "\n";
  const std::string cache = dir.File("cache/nested");
  const std::vector<std::string> common = {
      "-n", "6", "--seed", "3", "--user-rows", "1", "--prefix-cache-dir", cache};
  const RunResult first = Batch(dir, input, dir.File("first.jsonl"), common);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const RunResult second = Batch(dir, input, dir.File("second.jsonl"), common);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  // Reported: the first run wrote the blocks, the second mapped them in.
  EXPECT_NE(first.err.find(" files written)"), std::string::npos) << first.err;
  EXPECT_NE(second.err.find(" blocks mapped in from files, "), std::string::npos) << second.err;
  EXPECT_EQ(second.err.find("warning"), std::string::npos) << second.err;
  auto first_recs = Records(ReadFile(dir.File("first.jsonl")));
  auto second_recs = Records(ReadFile(dir.File("second.jsonl")));
  ASSERT_EQ(second_recs.size(), 2u);
  for (auto& [id, rec] : second_recs) {
    json& usage = rec["response"]["body"]["usage"];
    json& first_usage = first_recs.at(id)["response"]["body"]["usage"];
    const int cached = usage["prompt_tokens_details"]["cached_tokens"];
    EXPECT_GE(cached, 64) << id;
    if (id == "batch-1") {
      EXPECT_EQ(first_usage["prompt_tokens_details"]["cached_tokens"], 0);
    }
    EXPECT_GE(cached, first_usage["prompt_tokens_details"]["cached_tokens"].get<int>()) << id;
    usage.erase("prompt_tokens_details");
    first_usage.erase("prompt_tokens_details");
    EXPECT_EQ(rec, first_recs.at(id)) << id;
  }
  struct Bad {
    std::vector<std::string> args;
    std::string error;
  };
  const std::string file = dir.File("first.jsonl");
  for (const Bad& b : std::vector<Bad>{
           {{"--prefix-cache-dir", file}, "--prefix-cache-dir " + file + ": "},
           {{"--prefix-cache-dir", cache, "--prefix-cache", "off"}, "needs --prefix-cache on"},
           {{"--prefix-cache-dir", cache, "--prefix-cache-dir-max-mb", "0"},
            "--prefix-cache-dir-max-mb must be in [1, 1048576], got 0"},
           {{"--prefix-cache-dir", cache, "--kv-block-size", "0"}, "needs the paged KV cache"}}) {
    const RunResult bad = Batch(dir, input, dir.File("bad.jsonl"), b.args);
    EXPECT_NE(bad.exit_code, 0) << b.error;
    EXPECT_NE(bad.err.find(b.error), std::string::npos) << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  }
}

}  // namespace
}  // namespace wc::test
