// The chat with speculative decoding (issue 34), full-screen through tmux (tests/app/tmux_chat.h)
// and in line mode: the status bar shows tokens per decode step with --speculate lookup and not
// without; the greedy reply is the same either way; /set speculate switches it; /stats counts the
// proposals; a saved chat records the setting and --resume keeps it unless the flags say
// otherwise; --beams with --speculate is one line.
#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/app/tmux_chat.h"
#include "tests/test_util.h"

namespace wc::test {
namespace {

const char kRepeat[] = "Repeat: the sea is wide and the sea is deep, the sea is wide and deep.";
const std::vector<std::string> kGreedy = {"-n", "40", "--temperature", "0", "--no-save"};

std::vector<std::string> With(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The status bar's row after a reply to kRepeat, and the reply.
struct Shown {
  std::string status, reply;
};

Shown ReplyToRepeat(TmuxChat& chat) {
  chat.WaitForStart();
  EXPECT_FALSE(Contains(chat.Rows()[22], "tok/step")) << "no figure before a reply";
  chat.Enter(kRepeat);
  chat.WaitForRow(22, kIdleWithSpeed);
  const std::vector<std::string> rows = chat.Rows();
  return {rows[22], ReplyAfter(rows, std::string("> ") + kRepeat)};
}

TEST(ChatSpeculation, TheStatusBarShowsTokensPerStepAndTheReplyIsTheSame) {
  TmuxChat on(80, 24, With(kGreedy, {"--speculate", "lookup"}));
  const Shown with = ReplyToRepeat(on);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(with.status, m, std::regex(R"(\| ([0-9]+\.[0-9]) tok/step \|)")))
      << with.status;
  EXPECT_GE(std::stod(m[1]), 1.0) << with.status;  // at least the one token each step decodes
  EXPECT_FALSE(with.reply.empty()) << on.Screen();
  // /stats counts the proposals; /set speculate off takes the figure away from the next reply.
  on.Enter("/stats");
  on.WaitForText("proposed tokens accepted");
  on.Enter("/set speculate off");
  on.WaitForText("(speculate off)");
  on.Enter("/retry same");
  on.WaitFor("the retried reply without the figure", [](const std::string& s) {
    const std::vector<std::string> rows = Lines(s);
    return rows.size() > 22 && std::regex_match(rows[22], std::regex(kIdleWithSpeed)) &&
           !Contains(rows[22], "tok/step");
  });

  TmuxChat off(80, 24, With(kGreedy, {"--speculate", "off"}));
  const Shown without = ReplyToRepeat(off);
  EXPECT_FALSE(Contains(without.status, "tok/step")) << without.status;
  EXPECT_EQ(with.reply, without.reply);
}

RunResult Plain(const std::vector<std::string>& args, const std::string& input) {
  return RunWormchat(With({"chat", "--plain", "--seed", "7", "--threads", "1"}, args), input);
}

TEST(ChatSpeculation, LineModeIsTheSameAndSavedChatsKeepTheSetting) {
  TempDir dir;
  const std::string input = std::string(kRepeat) + "\nAnd once more, the sea is wide.\n";
  const RunResult off = Plain({"-n", "40", "--temperature", "0", "--no-save", "--speculate", "off"},
                              input + "/quit\n");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  const std::vector<std::string> keep = {"-n", "40",          "--temperature",
                                         "0",  "--chats-dir", dir.path()};
  const RunResult on =
      Plain(With(keep, {"--speculate", "lookup", "--speculate-k", "4"}), input + "/stats\n/quit\n");
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_EQ(on.out.substr(0, off.out.size()), off.out);  // the replies, then /stats
  EXPECT_NE(on.out.find("speculation: prompt lookup, k up to 4, n-grams up to 3; last reply: "),
            std::string::npos)
      << on.out;
  // The saved chat's header records it; --resume keeps it, or takes the flags given.
  std::string saved;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    saved += ReadFile(e.path().string());
  EXPECT_NE(saved.find("\nspeculate: lookup\nspeculate-k: 4\n"), std::string::npos) << saved;
  const RunResult resumed = Plain(With(keep, {"--resume"}), "/stats\n/quit\n");
  EXPECT_NE(resumed.out.find("speculation: prompt lookup, k up to 4"), std::string::npos)
      << resumed.out << resumed.err;
  const RunResult resumed_off =
      Plain(With(keep, {"--resume", "--speculate", "off"}), "/stats\n/quit\n");
  EXPECT_NE(resumed_off.out.find("speculation: off"), std::string::npos) << resumed_off.out;
  // Beam search does not speculate: the pair is refused in one line.
  const RunResult both = Plain({"--beams", "2", "--speculate", "lookup", "--no-save"}, "/quit\n");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("--speculate: beam search (--beams) does not speculate"),
            std::string::npos)
      << both.err;
  EXPECT_EQ(std::count(both.err.begin(), both.err.end(), '\n'), 1) << both.err;
}

// A draft model: the replies are those without it; /stats names it; /set speculate draft
// without one loaded says how to start with one; a bad draft is one line at start.
TEST(ChatSpeculation, ADraftModelGivesTheSameRepliesAndStatsNameIt) {
  const std::string input = std::string(kRepeat) + "\nAnd once more, the sea is wide.\n";
  const std::vector<std::string> greedy = {"-n", "30", "--temperature", "0", "--no-save"};
  const RunResult off = Plain(greedy, input + "/set speculate draft\n/quit\n");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_NE(off.out.find("no draft model: start the chat with --draft-model DIR"),
            std::string::npos)
      << off.out;
  const std::string draft = std::string(WORMCHAT_TEST_DATA) + "/../assets/default-model";
  const RunResult on = Plain(With(greedy, {"--draft-model", draft, "--speculate-k", "3"}),
                             input + "/stats\n/quit\n");
  ASSERT_EQ(on.exit_code, 0) << on.err;
  const size_t replies = off.out.find("(no draft model");
  ASSERT_NE(replies, std::string::npos);
  EXPECT_EQ(on.out.substr(0, replies), off.out.substr(0, replies));
  EXPECT_NE(on.out.find("speculation: draft model " + draft + ", k up to 3; last reply: "),
            std::string::npos)
      << on.out;
  const RunResult bad = Plain(With(greedy, {"--speculate", "draft"}), "/quit\n");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--speculate draft needs --draft-model"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace wc::test
