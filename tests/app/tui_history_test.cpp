// The chat's input history (app/tui/history.h): readline-style walk with a draft, the file under
// $XDG_STATE_HOME, its escaping, cap, atomic replacement, and a corrupt or unusable file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "app/tui/history.h"
#include "tests/test_util.h"

namespace wc::tui {
namespace {

using test::ReadFile;
using test::TempDir;
using test::WriteFile;

// Sets (or unsets, for nullptr) an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

TEST(History, WalkKeepsTheDraft) {
  History h;
  for (const char* e : {"a", "b", "c"}) EXPECT_TRUE(h.Add(e));
  EXPECT_FALSE(h.walking());
  EXPECT_EQ(h.Older("draft"), "c");
  EXPECT_TRUE(h.walking());
  EXPECT_EQ(h.Older("c"), "b");
  EXPECT_EQ(h.Older("b"), "a");
  EXPECT_EQ(h.Older("a"), std::nullopt);  // the oldest: stay
  EXPECT_EQ(h.Newer("a"), "b");
  EXPECT_EQ(h.Newer("b"), "c");
  EXPECT_EQ(h.Newer("c"), "draft");
  EXPECT_FALSE(h.walking());
  EXPECT_EQ(h.Newer("draft"), std::nullopt);
  EXPECT_EQ(History().Older("x"), std::nullopt);  // nothing to walk
}

TEST(History, EditsDuringAWalkLastUntilItEnds) {
  History h;
  for (const char* e : {"a", "b", "c"}) h.Add(e);
  EXPECT_EQ(h.Older(""), "c");
  EXPECT_EQ(h.Older("c edited"), "b");
  EXPECT_EQ(h.Newer("b"), "c edited");
  EXPECT_EQ(h.Newer("c edited"), "");  // the (empty) draft
  EXPECT_EQ(h.Older(""), "c edited");
  EXPECT_EQ(h.entries(), (std::vector<std::string>{"a", "b", "c"}));  // entries never change
  EXPECT_TRUE(h.Add("x"));  // ends the walk: the edit is gone
  EXPECT_EQ(h.Older(""), "x");
  EXPECT_EQ(h.Older("x"), "c");
  h.EndWalk();
  EXPECT_EQ(h.Older("new draft"), "x");
}

TEST(History, AddSkipsEmptyBlankAndRepeatedEntries) {
  History h;
  EXPECT_FALSE(h.Add(""));
  EXPECT_FALSE(h.Add(" \t\n "));
  EXPECT_TRUE(h.Add("hi"));
  EXPECT_FALSE(h.Add("hi"));  // a consecutive duplicate
  EXPECT_TRUE(h.Add("there"));
  EXPECT_TRUE(h.Add("hi"));  // not consecutive: added
  EXPECT_TRUE(h.Add("bad \xFF byte"));
  EXPECT_EQ(h.entries(), (std::vector<std::string>{"hi", "there", "hi", "bad \xEF\xBF\xBD byte"}));
  EXPECT_EQ(h.Save(), "");  // in memory only: nothing to do, no warning
}

TEST(History, EscapingIsUnambiguous) {
  EXPECT_EQ(History::Escape("a\\b\nc\\n"), "a\\\\b\\nc\\\\n");
  std::string back;
  EXPECT_TRUE(History::Unescape("a\\\\b\\nc\\\\n", &back));
  EXPECT_EQ(back, "a\\b\nc\\n");
  EXPECT_FALSE(History::Unescape("a\\q", &back));          // unknown escape
  EXPECT_FALSE(History::Unescape("ends with \\", &back));  // lone backslash
  EXPECT_FALSE(History::Unescape("\xFF", &back));          // not UTF-8
  EXPECT_FALSE(History::Unescape("", &back));              // empty entry
}

TEST(History, DefaultPathFollowsXdgStateHome) {
  {
    ScopedEnv state("XDG_STATE_HOME", "/x/state");
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(History::DefaultPath(), "/x/state/wormchat/history");
  }
  {
    ScopedEnv state("XDG_STATE_HOME", "");
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(History::DefaultPath(), "/home/u/.local/state/wormchat/history");
  }
  {
    ScopedEnv state("XDG_STATE_HOME", "relative/dir");  // not absolute: ignored (XDG spec)
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(History::DefaultPath(), "/home/u/.local/state/wormchat/history");
  }
  {
    ScopedEnv state("XDG_STATE_HOME", nullptr);
    ScopedEnv home("HOME", nullptr);
    EXPECT_EQ(History::DefaultPath(), "");
  }
}

TEST(History, RoundTripThroughTheFile) {
  TempDir tmp;
  ScopedEnv state("XDG_STATE_HOME", tmp.File("state").c_str());
  const std::string path = History::DefaultPath();
  ASSERT_EQ(path, tmp.File("state/wormchat/history"));
  {
    History h(path);
    EXPECT_EQ(h.warning(), "");  // a missing file is an empty history
    EXPECT_EQ(h.size(), 0u);
    h.Add("line one\nline two \\n");
    h.Add("caf\xC3\xA9 \xE4\xB8\x80");
    EXPECT_EQ(h.Save(), "");
  }
  EXPECT_EQ(ReadFile(path), "line one\\nline two \\\\n\ncaf\xC3\xA9 \xE4\xB8\x80\n");
  struct stat st;
  ASSERT_EQ(stat(tmp.File("state/wormchat").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat(tmp.File("state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);  // created too
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  History again(path);
  EXPECT_EQ(again.warning(), "");
  EXPECT_EQ(again.entries(),
            (std::vector<std::string>{"line one\nline two \\n", "caf\xC3\xA9 \xE4\xB8\x80"}));
  EXPECT_EQ(again.Older(""), "caf\xC3\xA9 \xE4\xB8\x80");
}

TEST(History, KeepsTheLastThousandEntries) {
  TempDir tmp;
  const std::string path = tmp.File("history");
  History h(path);
  for (int i = 0; i < 1005; ++i) h.Add("e" + std::to_string(i));
  EXPECT_EQ(h.size(), 1000u);
  EXPECT_EQ(h.entries().front(), "e5");
  EXPECT_EQ(h.Save(), "");
  EXPECT_EQ(test::CountLines(ReadFile(path)), 1000);
  History again(path);
  ASSERT_EQ(again.size(), 1000u);
  EXPECT_EQ(again.entries().front(), "e5");
  EXPECT_EQ(again.entries().back(), "e1004");
  // A longer file (written by hand) loads its newest 1000.
  std::string text;
  for (int i = 0; i < 1200; ++i) text += "f" + std::to_string(i) + "\n";
  WriteFile(path, text);
  History long_file(path);
  EXPECT_EQ(long_file.warning(), "");
  ASSERT_EQ(long_file.size(), 1000u);
  EXPECT_EQ(long_file.entries().front(), "f200");
}

TEST(History, SaveReplacesTheFileAtomically) {
  TempDir tmp;
  const std::string path = tmp.File("history");
  History h(path);
  h.Add("first");
  ASSERT_EQ(h.Save(), "");
  struct stat before;
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  std::ifstream reader(path, std::ios::binary);  // a reader that opened the old file
  h.Add("second");
  ASSERT_EQ(h.Save(), "");
  // The new file is a new inode renamed over the old one: the reader still sees the whole old
  // file, never a half-written one, and no temporary file is left behind.
  const std::string old_text((std::istreambuf_iterator<char>(reader)),
                             std::istreambuf_iterator<char>());
  EXPECT_EQ(old_text, "first\n");
  struct stat after;
  ASSERT_EQ(stat(path.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino);
  EXPECT_EQ(ReadFile(path), "first\nsecond\n");
  EXPECT_EQ(DirEntries(tmp.path()), (std::vector<std::string>{"history"}));
  EXPECT_EQ(h.Save(), "");  // nothing new: the file is not touched
  struct stat untouched;
  ASSERT_EQ(stat(path.c_str(), &untouched), 0);
  EXPECT_EQ(untouched.st_ino, after.st_ino);
}

TEST(History, SaveMergesWhatAnotherSessionSaved) {
  TempDir tmp;
  const std::string path = tmp.File("history");
  History one(path), two(path);
  one.Add("from one");
  ASSERT_EQ(one.Save(), "");
  two.Add("from two");
  ASSERT_EQ(two.Save(), "");
  EXPECT_EQ(ReadFile(path), "from one\nfrom two\n");
  one.Add("from one again");
  ASSERT_EQ(one.Save(), "");
  EXPECT_EQ(ReadFile(path), "from one\nfrom two\nfrom one again\n");
}

TEST(History, CorruptFileLoadsWhatItCanWithOneWarning) {
  TempDir tmp;
  const std::string path = tmp.File("history");
  WriteFile(path, "good\n\\q bad escape\n\xFF\xFE\nalso good\n\nends with \\");
  History h(path);
  EXPECT_EQ(h.entries(), (std::vector<std::string>{"good", "also good"}));
  EXPECT_EQ(h.warning(), "history file " + path +
                             ": skipped 4 lines that could not be read (first: line 2); they are "
                             "dropped at the next save");
  h.Add("new");
  EXPECT_EQ(h.Save(), "");
  EXPECT_EQ(ReadFile(path), "good\nalso good\nnew\n");
  EXPECT_EQ(History(path).warning(), "");
}

TEST(History, UnusableFileDisablesSavingWithoutThrowing) {
  TempDir tmp;
  const std::string path = tmp.File("history");
  std::filesystem::create_directory(path);  // a directory where the file should be
  History h(path);
  EXPECT_EQ(h.warning(),
            "history file " + path + " is not a regular file; history will not be saved");
  EXPECT_TRUE(h.Add("still works"));
  EXPECT_EQ(h.Older(""), "still works");
  EXPECT_EQ(h.Save(), "");
  EXPECT_TRUE(std::filesystem::is_directory(path));  // never overwritten
}

TEST(History, SaveFailureIsAWarningAndIsRetried) {
  TempDir tmp;
  WriteFile(tmp.File("blocker"), "a file where a directory should be");
  const std::string path = tmp.File("blocker/wormchat/history");
  History h(path);
  EXPECT_EQ(h.warning(),
            "history file " + path + ": Not a directory; history will not be saved this session");
  // Loading failed for a reason other than a missing file: saving is off, silently.
  h.Add("kept in memory");
  EXPECT_EQ(h.Save(), "");

  // The directory cannot be created when the file was merely missing at load time.
  const std::string later = tmp.File("later/wormchat/history");
  History h2(later);
  EXPECT_EQ(h2.warning(), "");
  WriteFile(tmp.File("later"), "in the way");
  h2.Add("one");
  EXPECT_EQ(h2.Save(), "history not saved: cannot create directory " + tmp.File("later/wormchat") +
                           ": Not a directory");
  std::filesystem::remove(tmp.File("later"));
  EXPECT_EQ(h2.Save(), "");  // retried: the unsaved entry is written now
  EXPECT_EQ(ReadFile(later), "one\n");
}

}  // namespace
}  // namespace wc::tui
