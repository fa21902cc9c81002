// Checkpoint chat templates (model/chat/chat_template.h): each known template renders what
// @huggingface/jinja renders from its published text (tests/fixtures/chat_templates), a chat fed
// turn by turn spells and encodes the same text, and a template wormchat does not know is one line
// naming --chat-format.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/chat/chat_format.h"
#include "model/chat/chat_template.h"
#include "tests/test_util.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace wc {
namespace {

using Role = ChatMessage::Role;
using test::TempDir;
using test::WriteFile;

const std::string kFixtures = test::FixtureDir("chat_templates");

ChatTemplate Template(ChatTemplateKind kind) {
  ChatTemplate t;
  t.kind = kind;
  t.bos_token = kind == ChatTemplateKind::kLlama3 ? "<|begin_of_text|>" : "<s>";
  t.eos_token = kind == ChatTemplateKind::kLlama3   ? "<|eot_id|>"
                : kind == ChatTemplateKind::kChatMl ? "<|im_end|>"
                : kind == ChatTemplateKind::kZephyr ? "</s>"
                                                    : "<|endoftext|>";
  return t;
}

std::string Falcon3Text() {
  return test::ReadFile(kFixtures + "/falcon3.jinja");
}

const ChatTemplateKind kAllKinds[] = {ChatTemplateKind::kFalcon3, ChatTemplateKind::kFalconInstruct,
                                      ChatTemplateKind::kChatMl, ChatTemplateKind::kLlama3,
                                      ChatTemplateKind::kZephyr};

// The text a chat fed turn by turn holds (serving/conversation.cpp's order: [bos] + system + per
// turn its user turn, the reply as the model wrote it, [eos]; then the next user turn), with the
// EOS id spelled as the template's eos text.
std::string SpelledByTurns(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  const ChatFormat f = t.Format();
  std::string out = f.add_bos ? t.bos_token : "";
  bool after_reply = false;
  for (const ChatMessage& m : messages) {
    std::string body = f.trim_messages ? PythonStrip(m.content) : m.content;
    switch (m.role) {
      case Role::kSystem:
        out += f.system_prefix + body + f.system_suffix;
        break;
      case Role::kUser:
        if (f.collapse_blank_lines) body = CollapseBlankLines(body);
        out += (after_reply ? f.turn_separator : "") + f.user_prefix + body + f.user_suffix +
               f.assistant_prefix;
        break;
      case Role::kAssistant:
        // The reply as a model trained on the template writes it: Falcon-instruct cues
        // "Assistant:" and renders a reply as "Assistant: " + content, so the model writes the
        // space.
        if (f.collapse_blank_lines) body = " " + CollapseBlankLines(body);
        out += body;
        if (f.eos_ends_turn) out += t.eos_token;
        break;
    }
    after_reply = m.role == Role::kAssistant;
  }
  return out;
}

std::vector<std::vector<ChatMessage>> ChatShapedConversations() {
  return {
      {{Role::kUser, "Hi"}},
      {{Role::kSystem, "Be brief."}, {Role::kUser, "What is a falcon?"}},
      {{Role::kUser, "Hi"}, {Role::kAssistant, "Hello! How can I help?"}, {Role::kUser, "Bye"}},
      {{Role::kSystem, "You are a bird expert."},
       {Role::kUser, "Name one falcon."},
       {Role::kAssistant, "The peregrine."},
       {Role::kUser, "Another?"},
       {Role::kAssistant, "The gyrfalcon.\n\nIt lives in the Arctic."},
       {Role::kUser, " Thanks!\n\n\nBye.\n"}},
  };
}

TEST(ChatTemplate, TurnByTurnFramingSpellsTheRendering) {
  for (ChatTemplateKind kind : kAllKinds) {
    const ChatTemplate t = Template(kind);
    for (const auto& conv : ChatShapedConversations()) {
      EXPECT_EQ(SpelledByTurns(t, conv), t.Render(conv, true)) << t.name();
    }
  }
  // Llama-3 trims every message, in the rendering and in the turns (trim_messages).
  const ChatTemplate l3 = Template(ChatTemplateKind::kLlama3);
  EXPECT_EQ(l3.Render({{Role::kUser, "  hi \n"}}, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_TRUE(l3.Format().trim_messages);
}

// On a tokenizer of Falcon3's structure (tests/fixtures/tokenizer/toy_falcon3*: the Llama-3
// pre-tokenizer, newline and tab as added tokens), the ids a chat feeds turn by turn (as
// serving/conversation.cpp frames them: system, then per turn its user turn, the reply's tokens
// and EOS) are the encoding of the template's rendering of the whole conversation - for a reply
// the model wrote as the tokenizer encodes it.
TEST(ChatTemplate, TurnByTurnIdsAreTheRenderingsEncoding) {
  for (const char* toy : {"toy_falcon3", "toy_falcon3_rawnl"}) {
    const auto tok = Tokenizer::FromModelDir(test::FixtureDir("tokenizer") + "/" + toy);
    const int eos = 11;  // <|endoftext|>
    ASSERT_EQ(tok->Encode("<|endoftext|>"), std::vector<int>{eos});
    const ChatTemplate t = Template(ChatTemplateKind::kFalcon3);
    const ChatFormat f = t.Format();
    for (const auto& conv : ChatShapedConversations()) {
      std::vector<int> ids;
      auto append = [&](const std::vector<int>& part) {
        ids.insert(ids.end(), part.begin(), part.end());
      };
      bool after_reply = false;
      for (const ChatMessage& m : conv) {
        if (m.role == Role::kSystem) append(f.EncodeSystem(*tok, m.content));
        if (m.role == Role::kUser) append(f.EncodeUserTurn(*tok, m.content, after_reply));
        if (m.role == Role::kAssistant) {
          append(tok->Encode(m.content));
          append({eos});
        }
        after_reply = m.role == Role::kAssistant;
      }
      EXPECT_EQ(ids, tok->Encode(t.Render(conv, true))) << toy << ": " << t.Render(conv, true);
      // And what batch and generate feed for the same messages.
      EXPECT_EQ(EncodeMessages(*tok, f, conv, 0, eos), ids) << toy;
    }
  }
}

// Every stored template, rendered by @huggingface/jinja (tools/chat_template/render_reference.mjs,
// cross-checked with Python's Jinja2 as transformers sets it up) for each conversation of
// conversations.json, with and without the generation prompt: the same text, or the same raise.
TEST(ChatTemplate, RenderingsAreHuggingFaceJinjas) {
  const auto convs = nlohmann::json::parse(test::ReadFile(kFixtures + "/conversations.json"));
  const auto expected = nlohmann::json::parse(test::ReadFile(kFixtures + "/expected.json"));
  std::map<std::string, int> checked;
  for (const auto& e : expected) {
    const std::string name = e["template"];
    const std::optional<ChatTemplateKind> kind =
        RecognizeChatTemplate(test::ReadFile(kFixtures + "/" + name + ".jinja"));
    ASSERT_TRUE(kind.has_value()) << name << ".jinja is not compiled in (make_known_templates.py)";
    ChatTemplate t;
    t.kind = *kind;
    const auto& tokens = convs["special_tokens"][name];
    t.bos_token = tokens.value("bos_token", "");
    t.eos_token = tokens.value("eos_token", "");
    std::vector<ChatMessage> messages;
    for (const auto& m : convs["conversations"][e["conversation"].get<int>()]["messages"]) {
      const std::string role = m["role"];
      messages.push_back({role == "system" ? Role::kSystem
                          : role == "user" ? Role::kUser
                                           : Role::kAssistant,
                          m["content"]});
    }
    const bool gen = e["add_generation_prompt"];
    const std::string where =
        name + " conversation " + e["conversation"].dump() + (gen ? " +generation prompt" : "");
    if (e.contains("error")) {
      try {
        t.Render(messages, gen);
        ADD_FAILURE() << where << ": rendered, but Jinja raises " << e["error"];
      } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find(e["error"].get<std::string>()), std::string::npos)
            << where << ": " << err.what();
      }
    } else {
      EXPECT_EQ(t.Render(messages, gen), e["text"].get<std::string>()) << where;
    }
    ++checked[name];
  }
  EXPECT_EQ(checked.size(), 5u);
  for (const auto& [name, n] : checked) EXPECT_GE(n, 20) << name;
}

TEST(ChatTemplate, PythonStripIsStrSpaceAware) {
  EXPECT_EQ(PythonStrip(" \t\n\r\f\v\x1c x y \x1f"), "x y");
  EXPECT_EQ(PythonStrip("\u00a0\u3000\u2028ab\u0085\u202f"), "ab");
  EXPECT_EQ(PythonStrip("\u200b x \ufeff"), "\u200b x \ufeff");  // not spaces to Python
  EXPECT_EQ(PythonStrip("   "), "");
  EXPECT_EQ(PythonStrip("\xff a \xe2\x80"), "\xff a \xe2\x80");  // invalid UTF-8 kept
  EXPECT_EQ(CollapseBlankLines("a\n\n\nb\n\n\n\nc"), "a\n\nb\n\nc");
}

// Falcon3's template ends the last assistant message without the newline that ends earlier ones,
// and writes the generation prompt only after a last message.
TEST(ChatTemplate, Falcon3EndsTheLastAssistantMessageWithoutANewline) {
  const ChatTemplate t = Template(ChatTemplateKind::kFalcon3);
  EXPECT_EQ(t.Render({{Role::kUser, "U"}, {Role::kAssistant, "A"}}, true),
            "<|user|>\nU\n<|assistant|>\nA<|endoftext|><|assistant|>\n");
  EXPECT_EQ(t.Render({{Role::kUser, "U"}, {Role::kAssistant, "A"}, {Role::kUser, "V"}}, false),
            "<|user|>\nU\n<|assistant|>\nA<|endoftext|>\n<|user|>\nV\n");
  EXPECT_EQ(t.Render({}, true), "");
}

// Each stored template is recognised as its kind, and nothing else is: one character changed, or
// a template of another family, is not.
TEST(ChatTemplate, PublishedTextsAreRecognisedAndNothingElse) {
  for (const KnownChatTemplateText& k : KnownChatTemplateTexts()) {
    EXPECT_EQ(RecognizeChatTemplate(k.text), k.kind) << k.source;
    EXPECT_EQ(RecognizeChatTemplate("\n  " + std::string(k.text) + "\n"), k.kind) << k.source;
    std::string changed(k.text);
    changed[changed.size() / 2] ^= 1;
    EXPECT_EQ(RecognizeChatTemplate(changed), std::nullopt) << k.source;
  }
  EXPECT_EQ(RecognizeChatTemplate("{{ messages[0]['content'] }}"), std::nullopt);
  EXPECT_EQ(RecognizeChatTemplate(""), std::nullopt);
}

std::string ConfigWith(const nlohmann::json& chat_template) {
  nlohmann::json j = {{"eos_token", "<|endoftext|>"}, {"bos_token", nullptr}};
  j["chat_template"] = chat_template;
  return j.dump();
}

TEST(ChatTemplate, TokenizerConfigFormsAndErrors) {
  const std::string falcon3 = Falcon3Text();
  const ChatTemplateKind kind = ChatTemplateKind::kFalcon3;
  std::string unknown;
  const std::string path = "M/tokenizer_config.json";
  auto parsed = ParseChatTemplate(ConfigWith(falcon3), path, &unknown);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->kind, kind);
  EXPECT_TRUE(unknown.empty());
  // A list of named templates: the one named "default".
  parsed = ParseChatTemplate(ConfigWith(nlohmann::json::array(
                                 {nlohmann::json{{"name", "tool_use"}, {"template", "x"}},
                                  nlohmann::json{{"name", "default"}, {"template", falcon3}}})),
                             path, &unknown);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->kind, kind);
  EXPECT_EQ(parsed->eos_token, "<|endoftext|>");
  // eos_token as an AddedToken object.
  parsed = ParseChatTemplate(
      nlohmann::json({{"chat_template", falcon3}, {"eos_token", {{"content", "</s>"}}}}).dump(),
      path, &unknown);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->eos_token, "</s>");
  // No template: nothing to frame with, and nothing wrong.
  EXPECT_FALSE(ParseChatTemplate("{}", path, &unknown).has_value());
  EXPECT_TRUE(unknown.empty());
  // An unknown template: not an error of the file, but every framing will refuse in one line.
  EXPECT_FALSE(ParseChatTemplate(ConfigWith("{{ bos_token }}"), path, &unknown).has_value());
  EXPECT_NE(unknown.find(path), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("--chat-format"), std::string::npos) << unknown;
  EXPECT_EQ(unknown.find('\n'), std::string::npos) << unknown;
  // Malformed: one line naming the file and key.
  for (const std::string& bad :
       {ConfigWith(3),
        ConfigWith(
            nlohmann::json::array({nlohmann::json{{"name", "tool_use"}, {"template", "x"}}})),
        ConfigWith(nlohmann::json::array({7})), std::string("[1]"),
        std::string("{\"chat_template\": "), nlohmann::json({{"chat_template", falcon3}}).dump()}) {
    try {
      ParseChatTemplate(bad, path, &unknown);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path, 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

// Which framing a model directory gets: --chat-format, else chat_format.json, else a known
// template; an unknown template refuses to frame (naming --chat-format) but --raw still works.
TEST(ChatTemplate, ChatFormatFileWinsThenTheTemplate) {
  const std::string tok_dir = std::string(WORMCHAT_ASSETS_DIR) + "/default-model";
  const auto tok = Tokenizer::FromModelDir(tok_dir);
  const std::string falcon3 = Falcon3Text();
  TempDir dir;
  EXPECT_FALSE(ChatFormat::ForModel(dir.path(), "").has_value());
  WriteFile(dir.File("tokenizer_config.json"), ConfigWith(falcon3));
  std::optional<ChatFormat> f = ChatFormat::ForModel(dir.path(), "");
  ASSERT_TRUE(f.has_value());
  ASSERT_TRUE(f->chat_template.has_value());
  EXPECT_EQ(EncodePrompt(*tok, f, "hi", /*raw=*/false, 1),
            tok->Encode("<|user|>\nhi\n<|assistant|>\n"));
  WriteFile(dir.File("chat_format.json"), R"({"user_prefix": "Q: "})");
  f = ChatFormat::ForModel(dir.path(), "");
  ASSERT_TRUE(f.has_value());
  EXPECT_FALSE(f->chat_template.has_value());
  EXPECT_EQ(f->user_prefix, "Q: ");
  WriteFile(dir.File("other.json"), R"({"user_prefix": "Ask: "})");
  f = ChatFormat::ForModel(dir.path(), dir.File("other.json"));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->user_prefix, "Ask: ");
  try {
    ChatFormat::ForModel(dir.path(), dir.File("missing.json"));
    ADD_FAILURE() << "a missing --chat-format file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--chat-format"), std::string::npos) << e.what();
  }

  TempDir unknown_dir;
  WriteFile(unknown_dir.File("tokenizer_config.json"), ConfigWith("{{ messages }}"));
  f = ChatFormat::ForModel(unknown_dir.path(), "");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(EncodePrompt(*tok, f, "hi", /*raw=*/true, 1), tok->Encode("hi"));
  for (auto frame : {+[](const Tokenizer&t, const std::optional<ChatFormat>&fm) {
                       EncodePrompt(t, fm, "hi", /*raw=*/false, 1);
                     },
                     +[](const Tokenizer&t, const std::optional<ChatFormat>&fm) {
                       EncodeMessages(t, fm, {{Role::kUser, "hi"}}, 1, 2);
                     },
                     +[](const Tokenizer&t, const std::optional<ChatFormat>&fm) {
                       EncodeTurn(t, fm, "hi", /*chat=*/true, /*first_turn=*/false, 1, 2);
                     }}) {
    try {
      frame(*tok, f);
      ADD_FAILURE() << "an unknown template framed a prompt";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--chat-format"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace wc
