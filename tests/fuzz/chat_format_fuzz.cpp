// chat_format.json (model/chat/chat_format.h ChatFormat::Parse) and, on the same bytes,
// tokenizer_config.json's chat_template (model/chat/chat_template.h ParseChatTemplate), whose
// recognised templates are then rendered and turned into a chat format.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/chat/chat_format.h"
#include "model/chat/chat_template.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/chat_format.json";
  try {
    const wc::ChatFormat f =
        wc::ChatFormat::Parse(std::string_view(reinterpret_cast<const char*>(data), size), path);
    for (const std::string& s : f.stop) wc::fuzz::Require(!s.empty(), "non-empty stop strings");
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  const std::string config_path = "fuzz/tokenizer_config.json";
  try {
    std::string unknown;
    const std::optional<wc::ChatTemplate> t = wc::ParseChatTemplate(
        std::string_view(reinterpret_cast<const char*>(data), size), config_path, &unknown);
    wc::fuzz::Require(!t || unknown.empty(), "a recognised template has no refusal");
    wc::fuzz::Require(unknown.find('\n') == std::string::npos, "a one-line refusal");
    if (t) {
      using Role = wc::ChatMessage::Role;
      const std::string text =
          t->Render({{Role::kSystem, "s"}, {Role::kUser, "u"}, {Role::kAssistant, "a"}}, true);
      wc::fuzz::Require(!text.empty(), "a rendering");
      wc::fuzz::Require(t->Format().chat_template.has_value(), "the format keeps its template");
    }
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, config_path);
  }
  return 0;
}
