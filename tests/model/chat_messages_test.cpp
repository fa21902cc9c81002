// The chat format's framing of a whole message list (model/chat_format.h), which `wormchat batch`
// feeds for /v1/chat/completions requests, on the default model's tokenizer.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "model/chat/chat_format.h"
#include "tests/test_util.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace wc {
namespace {

using test::TempDir;
using test::WriteFile;

// The framing of a message list (model/chat_format.h), on the default model's tokenizer.
TEST(ChatFormatTest, EncodeMessagesFramesEachRole) {
  const std::string dir = std::string(WORMCHAT_ASSETS_DIR) + "/default-model";
  const auto tok = Tokenizer::FromModelDir(dir);
  const std::optional<ChatFormat> format = ChatFormat::Load(dir);
  ASSERT_TRUE(format.has_value());
  ASSERT_TRUE(format->add_bos);
  const int bos = 1, eos = 2;
  using Role = ChatMessage::Role;
  EXPECT_EQ(EncodeMessages(*tok, format, {{Role::kUser, "What is a cat?"}}, bos, eos),
            EncodePrompt(*tok, format, "What is a cat?", /*raw=*/false, bos));
  std::vector<int> want = {bos};
  for (const std::vector<int>& part :
       {tok->Encode("System: Be brief.\n"), format->EncodeUserTurn(*tok, "Hi"),
        tok->Encode("Hello there."), std::vector<int>{eos}, format->EncodeUserTurn(*tok, "Bye")})
    want.insert(want.end(), part.begin(), part.end());
  EXPECT_EQ(EncodeMessages(*tok, format,
                           {{Role::kSystem, "Be brief."},
                            {Role::kUser, "Hi"},
                            {Role::kAssistant, "Hello there."},
                            {Role::kUser, "Bye"}},
                           bos, eos),
            want);
  // Without a chat format only one user message, as it is (as EncodePrompt).
  EXPECT_EQ(EncodeMessages(*tok, std::nullopt, {{Role::kUser, "Hi"}}, bos, eos), tok->Encode("Hi"));
  EXPECT_THROW(
      EncodeMessages(*tok, std::nullopt, {{Role::kSystem, "x"}, {Role::kUser, "Hi"}}, bos, eos),
      Error);
}

TEST(ChatFormatTest, SystemKeysAreReadFromChatFormatJson) {
  TempDir dir;
  WriteFile(dir.File("chat_format.json"),
            R"({"system_prefix": "<<SYS>>", "system_suffix": "<</SYS>>"})");
  const std::optional<ChatFormat> f = ChatFormat::Load(dir.path());
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->system_prefix, "<<SYS>>");
  EXPECT_EQ(f->system_suffix, "<</SYS>>");
  EXPECT_EQ(ChatFormat{}.system_prefix, "System: ");
  EXPECT_EQ(ChatFormat{}.system_suffix, "\n");
  WriteFile(dir.File("chat_format.json"), R"({"system_prefix": 3})");
  try {
    ChatFormat::Load(dir.path());
    ADD_FAILURE() << "a number for system_prefix was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'system_prefix' must be a string"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace wc
