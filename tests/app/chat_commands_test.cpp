// The chat's slash commands (app/chat/chat_commands.h): parsing of /export, /copy, /open and
// /find (a bad one is a one-line hint), the help, and Tab completion of command and file names -
// the latter on a temporary directory made the current one (typed_path.h).
#include "app/chat/chat_commands.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app/chat/typed_path.h"
#include "serving/run_options.h"
#include "util/error.h"

namespace wc {
namespace {

using Kind = ChatCommand::Kind;
using Lines = std::vector<std::string>;

ChatCommand Parse(const std::string& line) {
  std::string message;
  return ParseChatCommand(line, &message);
}

TEST(ChatCommands, SetSpeculation) {
  ChatCommand c = Parse("/set speculate lookup");
  EXPECT_EQ(c.kind, Kind::kSet);
  EXPECT_EQ(c.name, "speculate");
  EXPECT_EQ(c.path, "lookup");
  c = Parse("/set speculate-k 4");
  EXPECT_EQ(c.kind, Kind::kSet);
  EXPECT_EQ(c.value, 4);
  c = Parse("/set lookup-ngram 2");
  EXPECT_EQ(c.kind, Kind::kSet);
  EXPECT_EQ(c.value, 2);
  c = Parse("/set speculate draftish");
  EXPECT_EQ(c.kind, Kind::kHint);
  EXPECT_EQ(c.text, "/set speculate must be off, lookup or draft, got draftish");
  for (const char* bad : {"/set speculate-k 17", "/set speculate-k 0", "/set lookup-ngram 1.5"}) {
    c = Parse(bad);
    EXPECT_EQ(c.kind, Kind::kHint) << bad;
    EXPECT_NE(c.text.find("must be a whole number in 1-16"), std::string::npos) << c.text;
  }
  EXPECT_EQ(CompleteChatCommand("/set spec"), (Lines{"/set speculate ", "/set speculate-k "}));
}

TEST(ChatCommands, Export) {
  ChatCommand c = Parse("/export notes/my chat.md  ");
  EXPECT_EQ(c.kind, Kind::kExport);
  EXPECT_EQ(c.path, "notes/my chat.md");
  EXPECT_EQ(c.value, 0);
  c = Parse("  /EXPORT! a.json");
  EXPECT_EQ(c.kind, Kind::kExport);
  EXPECT_EQ(c.path, "a.json");
  EXPECT_EQ(c.value, 1);
  c = Parse("/export");
  EXPECT_EQ(c.kind, Kind::kHint);
  EXPECT_EQ(c.text,
            "/export needs a file name: FILE.md (Markdown) or FILE.json (JSON); /export! FILE "
            "overwrites one");
  EXPECT_EQ(Parse("/export!   ").kind, Kind::kHint);
  EXPECT_EQ(Parse("/exports a.md").kind, Kind::kHint);
}

TEST(ChatCommands, Copy) {
  ChatCommand c = Parse("/copy");
  EXPECT_EQ(c.kind, Kind::kCopy);
  EXPECT_EQ(c.name, "");
  c = Parse("/copy code");
  EXPECT_EQ(c.kind, Kind::kCopy);
  EXPECT_EQ(c.name, "code");
  EXPECT_EQ(c.value, 1);  // the first code block
  c = Parse("/copy CODE 3");
  EXPECT_EQ(c.kind, Kind::kCopy);
  EXPECT_EQ(c.name, "code");
  EXPECT_EQ(c.value, 3);
  const std::string hint =
      "/copy takes nothing (the last reply) or code N (its Nth code block; N = 1 if left out)";
  for (const char* bad : {"/copy code 0", "/copy code 1.5", "/copy code x", "/copy code 1 2",
                          "/copy 2", "/copy all"}) {
    c = Parse(bad);
    EXPECT_EQ(c.kind, Kind::kHint) << bad;
    EXPECT_EQ(c.text, hint) << bad;
  }
}

TEST(ChatCommands, Open) {
  ChatCommand c = Parse("/open 12");
  EXPECT_EQ(c.kind, Kind::kOpen);
  EXPECT_EQ(c.value, 12);
  for (const char* bad : {"/open", "/open 0", "/open -1", "/open 2.5", "/open two", "/open 1 2"}) {
    c = Parse(bad);
    EXPECT_EQ(c.kind, Kind::kHint) << bad;
    EXPECT_EQ(c.text, "/open needs the number of a chat in the /chats list, e.g. /open 2") << bad;
  }
}

TEST(ChatCommands, Find) {
  ChatCommand c = Parse("/find  beam search\t");
  EXPECT_EQ(c.kind, Kind::kFind);
  EXPECT_EQ(c.text, "beam search");
  c = Parse("/find ");
  EXPECT_EQ(c.kind, Kind::kHint);
  EXPECT_EQ(c.text, "/find needs the text to look for (Ctrl-F finds as you type)");
}

TEST(ChatCommands, HelpListsEveryCommandAndKey) {
  const std::string help = ChatHelpText();
  for (const char* item : {"/help",
                           "/reset",
                           "/set NAME VALUE",
                           "/beams W",
                           "/stats",
                           "/mesh",
                           "/save FILE",
                           "/load FILE",
                           "/retry",
                           "/retry same",
                           "/undo",
                           "/edit",
                           "/chats",
                           "/title TEXT",
                           "/forget",
                           "/quit, /bye",
                           "/export FILE",
                           "/export! FILE",
                           "/copy ",
                           "/copy code [N]",
                           "/open N",
                           "/find TEXT",
                           "Tab",
                           "Ctrl-F",
                           "n / N",
                           "Esc",
                           "Ctrl-R",
                           "mouse wheel"})
    EXPECT_NE(help.find(item), std::string::npos) << item;
}

TEST(ChatCommands, CompletesTheNewCommandNames) {
  EXPECT_EQ(CompleteChatCommand("/ex"), (Lines{"/export ", "/export! "}));
  EXPECT_EQ(CompleteChatCommand("/co"), (Lines{"/copy"}));
  EXPECT_EQ(CompleteChatCommand("/op"), (Lines{"/open "}));
  EXPECT_EQ(CompleteChatCommand("/fi"), (Lines{"/find "}));
  EXPECT_EQ(CompleteChatCommand("/set t"),
            (Lines{"/set temperature ", "/set top-k ", "/set top-p "}));
}

TEST(TypedPath, CommonPrefixStopsAtACharacterBoundary) {
  EXPECT_EQ(CommonPrefix({}), "");
  EXPECT_EQ(CommonPrefix({"abc"}), "abc");
  EXPECT_EQ(CommonPrefix({"notes.md", "notes.json", "notes-dir/"}), "notes");
  EXPECT_EQ(CommonPrefix({"caf\xC3\xA9", "caf\xC3\xA8"}), "caf");  // é and è share a lead byte
  EXPECT_EQ(CommonPrefix({"caf\xC3\xA9", "caf\xC3\xA9s"}), "caf\xC3\xA9");
}

// A temporary directory as the current one, and HOME, for the test's length.
class FileCompletion : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/wc_complete_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    old_cwd_ = std::filesystem::current_path();
    const char* home = std::getenv("HOME");
    had_home_ = home != nullptr;
    if (had_home_) old_home_ = home;
    for (const char* f :
         {"notes.md", "notes.json", "novel.txt", ".hidden.md", "caf\xC3\xA9.md", "caf\xC3\xA8.md",
          "notes-dir/a.md", "notes-dir/b.md", "x y/z.md", "home/mine.md"}) {
      const std::filesystem::path p = dir_ + "/" + f;
      std::filesystem::create_directories(p.parent_path());
      std::ofstream(p) << "x";
    }
    std::filesystem::create_directory_symlink(dir_ + "/notes-dir", dir_ + "/link");
    std::filesystem::current_path(dir_);
    ::setenv("HOME", (dir_ + "/home").c_str(), 1);
  }
  void TearDown() override {
    std::filesystem::current_path(old_cwd_);
    if (had_home_) {
      ::setenv("HOME", old_home_.c_str(), 1);
    } else {
      ::unsetenv("HOME");
    }
    std::filesystem::remove_all(dir_);
  }
  std::string dir_, old_home_;
  std::filesystem::path old_cwd_;
  bool had_home_ = false;
};

TEST_F(FileCompletion, ListsWhatMatchesWhenNothingLongerIsCommon) {
  EXPECT_EQ(CompleteChatCommand("/export no"), (Lines{"/export notes-dir/", "/export notes.json",
                                                      "/export notes.md", "/export novel.txt"}));
  EXPECT_EQ(CompleteChatCommand("/export notes."),
            (Lines{"/export notes.json", "/export notes.md"}));
  EXPECT_EQ(CompleteChatCommand("/save notes-dir/"),
            (Lines{"/save notes-dir/a.md", "/save notes-dir/b.md"}));
  // Everything but dot files; a symbolic link to a directory is a directory.
  EXPECT_EQ(CompleteChatCommand("/load "),
            (Lines{"/load caf\xC3\xA8.md", "/load caf\xC3\xA9.md", "/load home/", "/load link/",
                   "/load notes-dir/", "/load notes.json", "/load notes.md", "/load novel.txt",
                   "/load x y/"}));
}

TEST_F(FileCompletion, CompletesOneMatchOrTheLongerCommonPart) {
  EXPECT_EQ(CompleteChatCommand("/export notes.m"), (Lines{"/export notes.md"}));
  EXPECT_EQ(CompleteChatCommand("/load notes-d"), (Lines{"/load notes-dir/"}));
  EXPECT_EQ(CompleteChatCommand("/export not"), (Lines{"/export notes"}));
  EXPECT_EQ(CompleteChatCommand("/export ca"), (Lines{"/export caf"}));  // not half of é
  EXPECT_EQ(CompleteChatCommand("/export! x"), (Lines{"/export! x y/"}));
  EXPECT_EQ(CompleteChatCommand("/export! x y/"), (Lines{"/export! x y/z.md"}));
  EXPECT_EQ(CompleteChatCommand("/export ."), (Lines{"/export .hidden.md"}));
  EXPECT_EQ(CompleteChatCommand("/load link/a"), (Lines{"/load link/a.md"}));
  // As typed: the command's case and the spaces after it are kept.
  EXPECT_EQ(CompleteChatCommand("/EXPORT  not"), (Lines{"/EXPORT  notes"}));
}

TEST_F(FileCompletion, TildeIsListedAsHomeAndKeptAsTyped) {
  EXPECT_EQ(CompleteChatCommand("/export ~"), (Lines{"/export ~/"}));
  EXPECT_EQ(CompleteChatCommand("/export ~/"), (Lines{"/export ~/mine.md"}));
  EXPECT_EQ(ExpandHome("~/a.md"), dir_ + "/home/a.md");
  EXPECT_EQ(ExpandHome("~"), dir_ + "/home");
  EXPECT_EQ(ExpandHome("~user/a.md"), "~user/a.md");
  EXPECT_EQ(ExpandHome("a/~/b"), "a/~/b");
}

TEST_F(FileCompletion, NothingMatchesOrNotAFileCommand) {
  EXPECT_EQ(CompleteChatCommand("/export zzz"), Lines{});
  EXPECT_EQ(CompleteChatCommand("/export nodir/x"), Lines{});
  EXPECT_EQ(CompleteChatCommand("/title no"), Lines{});
  EXPECT_EQ(CompleteChatCommand("/find no"), Lines{});
  EXPECT_EQ(CompleteChatCommand("no"), Lines{});
}

}  // namespace
}  // namespace wc

namespace wc {
namespace {

// /set refuses what the run options' one declaration (serving/run_options.h) refuses, in its words,
// and takes what it holds.
TEST(ChatCommands, SetIsTheRunOptionsDeclaration) {
  using namespace run_option;
  struct Case {
    const RunOptionSpec& spec;
    const char* name;
    const char* bad;
  };
  for (const Case& c :
       {Case{kTemperature, "temperature", "-1"}, Case{kTopP, "top-p", "0"},
        Case{kTopK, "top-k", "1.5"}, Case{kSeed, "seed", "-4"},
        Case{kSpeculate, "speculate", "maybe"}, Case{kSpeculateK, "speculate-k", "17"},
        Case{kLookupNgram, "lookup-ngram", "0"}}) {
    const ChatCommand cmd = Parse(Cat("/set ", c.name, " ", c.bad));
    EXPECT_EQ(cmd.kind, Kind::kHint) << c.name;
    EXPECT_EQ(cmd.text, c.spec.Refusal(Cat("/set ", c.name), c.bad));
  }
  EXPECT_EQ(Parse("/set top-p 1").value, 1.0);
  EXPECT_EQ(Parse("/set seed 18446744073709551615").path, "18446744073709551615");
  // max-new-tokens is max-tokens' other name; a chat's reply has a token at least.
  EXPECT_EQ(Parse("/set max-new-tokens 9").name, "max-tokens");
  EXPECT_EQ(Parse("/set max-tokens 0").kind, Kind::kHint);
  EXPECT_EQ(Parse("/set colour 2").text,
            "/set: unknown setting 'colour'; settings: temperature, top-k, top-p, seed, "
            "max-tokens, render, speculate, speculate-k, lookup-ngram");
}

}  // namespace
}  // namespace wc
