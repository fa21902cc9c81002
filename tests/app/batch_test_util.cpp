#include "tests/app/batch_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

namespace wc::test {

json Completion(const std::string& id, const std::string& prompt, json body) {
  body["prompt"] = prompt;
  return {{"custom_id", id}, {"method", "POST"}, {"url", "/v1/completions"}, {"body", body}};
}

json Chat(const std::string& id, const json& messages, json body) {
  body["messages"] = messages;
  return {{"custom_id", id}, {"method", "POST"}, {"url", "/v1/chat/completions"}, {"body", body}};
}

json User(const std::string& content) {
  return {{"role", "user"}, {"content", content}};
}

std::string Jsonl(const std::vector<json>& lines) {
  std::string s;
  for (const json& j : lines) s += j.dump() + "\n";
  return s;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> SortedLines(const std::string& text) {
  std::vector<std::string> lines = Lines(text);
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::map<std::string, json> Records(const std::string& text) {
  std::map<std::string, json> out;
  for (const std::string& line : Lines(text)) {
    const json j = json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "not a record: " << line;
    if (!j.is_object()) continue;
    const std::string id = j.at("id").get<std::string>();
    EXPECT_EQ(out.count(id), 0u) << "record " << id << " written twice";
    out[id] = j;
  }
  return out;
}

RunResult Batch(const TempDir& dir, const std::string& input, const std::string& out,
                const std::vector<std::string>& args) {
  WriteFile(dir.File("in.jsonl"), input);
  std::vector<std::string> argv = {"batch", "-i", dir.File("in.jsonl"), "-o", out};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunWormchat(argv);
}

std::string Generate(const std::string& prompt, uint64_t seed, int n,
                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"generate",           "--prompt", prompt,           "--seed",
                                   std::to_string(seed), "-n",       std::to_string(n)};
  argv.insert(argv.end(), args.begin(), args.end());
  const RunResult r = RunWormchat(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  return r.out.empty() ? r.out : r.out.substr(0, r.out.size() - 1);
}

uint64_t DerivedSeed(uint64_t seed, const std::string& custom_id) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : custom_id) h = (h ^ c) * 0x100000001b3ull;
  uint64_t z = (h ^ seed) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string Text(const json& record) {
  const json& choice = record.at("response").at("body").at("choices").at(0);
  return choice.contains("text") ? choice.at("text").get<std::string>()
                                 : choice.at("message").at("content").get<std::string>();
}

std::string MixedInput() {
  return Jsonl({
      Completion("c1", "The cat", {{"seed", 7}}),
      Completion(
          "c2", "A dog is",
          {{"seed", 3}, {"temperature", 0.7}, {"top_k", 3}, {"top_p", 0.8}, {"max_tokens", 10}}),
      Chat("c3", json::array({User("What does it mean to sail?")}), {{"seed", 5}}),
      Chat("c4", json::array({User("What is a tree?")}),
           {{"seed", 9}, {"stop", json::array({"a", "zz"})}, {"max_tokens", 16}}),
      Completion("c5", "Once upon a time", {{"seed", 2}, {"top_k", -1}, {"temperature", 0}}),
      Chat("c6",
           json::array({{{"role", "system"}, {"content", "Answer briefly."}},
                        User("What is a dog?"),
                        {{"role", "assistant"}, {"content", "An animal."}},
                        User("And a cat?")}),
           {{"seed", 4}}),
  });
}

const RunResult& MixedRun() {
  static const RunResult r = [] {
    TempDir dir;
    RunResult res = Batch(dir, MixedInput(), dir.File("out.jsonl"), {"-n", "12"});
    res.out = ReadFile(dir.File("out.jsonl"));  // the records, not stdout
    return res;
  }();
  return r;
}

std::string LongInput() {
  std::string s;
  for (size_t i = 1; i <= kLongCount; ++i)
    s += "Tell me about the number " + std::to_string(i) + ".\n";
  return s;
}
std::vector<std::string> LongArgs() {
  return {"-n", "16", "--user-rows", "2", "--quiet"};
}

const std::string& LongReference() {
  static const std::string out = [] {
    TempDir dir;
    const RunResult r = Batch(dir, LongInput(), dir.File("out.jsonl"), LongArgs());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return ReadFile(dir.File("out.jsonl"));
  }();
  return out;
}

}  // namespace wc::test
