// Regression transcripts: tests/transcripts/*.txt hold prompts and the exact replies the default
// model gave. Replaying them through the real binary must reproduce every byte.
//
// Format:
//   # comment lines; one "# args: ..." line gives the generate options used for every prompt
//   >>> prompt text
//   reply lines (up to the next ">>> " line or the end)
#include <dirent.h>

#include <sstream>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace wc {
namespace {

struct Exchange {
  std::string prompt, reply;
};

struct Transcript {
  std::vector<std::string> args;
  std::vector<Exchange> exchanges;
};

Transcript Parse(const std::string& text) {
  Transcript t;
  std::istringstream in(text);
  std::string line;
  bool in_reply = false;
  while (std::getline(in, line)) {
    if (!in_reply && line.rfind("# args:", 0) == 0) {
      std::istringstream a(line.substr(7));
      std::string w;
      while (a >> w) t.args.push_back(w);
    } else if (line.rfind(">>> ", 0) == 0) {
      t.exchanges.push_back({line.substr(4), ""});
      in_reply = true;
    } else if (in_reply) {
      std::string& r = t.exchanges.back().reply;
      r += (r.empty() ? "" : "\n") + line;
    }
  }
  for (auto& e : t.exchanges)  // trailing blank lines separate exchanges
    while (!e.reply.empty() && e.reply.back() == '\n') e.reply.pop_back();
  return t;
}

std::vector<std::string> TranscriptFiles() {
  std::vector<std::string> files;
  const std::string dir = std::string(WORMCHAT_TEST_DATA) + "/transcripts";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0)
        files.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  return files;
}

TEST(Transcripts, DefaultModelRepliesReplayExactly) {
  const auto files = TranscriptFiles();
  ASSERT_FALSE(files.empty()) << "no transcripts in tests/transcripts";
  for (const auto& file : files) {
    const Transcript t = Parse(test::ReadFile(file));
    ASSERT_FALSE(t.exchanges.empty()) << file;
    ASSERT_FALSE(t.args.empty()) << file << ": needs a '# args:' line";
    for (const auto& e : t.exchanges) {
      std::vector<std::string> args = {"generate", "--prompt", e.prompt};
      args.insert(args.end(), t.args.begin(), t.args.end());
      const auto r = test::RunWormchat(args);
      ASSERT_EQ(r.exit_code, 0) << file << ": " << e.prompt << "\n" << r.err;
      std::string got = r.out;
      while (!got.empty() && got.back() == '\n') got.pop_back();
      EXPECT_EQ(got, e.reply) << file << ": prompt '" << e.prompt << "'";
    }
  }
}

TEST(Transcripts, ParserReadsArgsPromptsAndMultiLineReplies) {
  const Transcript t =
      Parse("# x\n# args: --temperature 0 -n 5\n>>> a?\nline 1\nline 2\n\n>>> b\nok\n");
  ASSERT_EQ(t.args, (std::vector<std::string>{"--temperature", "0", "-n", "5"}));
  ASSERT_EQ(t.exchanges.size(), 2u);
  EXPECT_EQ(t.exchanges[0].prompt, "a?");
  EXPECT_EQ(t.exchanges[0].reply, "line 1\nline 2");
  EXPECT_EQ(t.exchanges[1].reply, "ok");
}

}  // namespace
}  // namespace wc
