#include "app/chat/chat_export.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/chat/chat_store.h"
#include "app/chat/typed_path.h"
#include "util/error.h"

namespace wc {
namespace {

using ojson = nlohmann::ordered_json;

// The shortest decimal that reads back as `f` ("0.9", not 0.899999976).
std::string ShortFloat(float f) {
  char buf[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return buf;
}

// `f` as a JSON number that prints as ShortFloat(f).
double JsonFloat(float f) {
  return std::strtod(ShortFloat(f).c_str(), nullptr);
}

std::string BeamsText(const ConversationSettings& s) {
  if (!s.beams) return "sampling";
  const BeamParams& b = *s.beams;
  return Cat("beams ", b.num_beams,
             b.length_penalty != 1.0f ? ", length penalty " + ShortFloat(b.length_penalty) : "",
             b.early_stopping ? ", early stopping" : "");
}

bool SameBeams(const ConversationSettings& a, const ConversationSettings& b) {
  if (a.beams.has_value() != b.beams.has_value()) return false;
  return !a.beams || (a.beams->num_beams == b.beams->num_beams &&
                      a.beams->length_penalty == b.beams->length_penalty &&
                      a.beams->early_stopping == b.beams->early_stopping);
}

// "temperature 0.9, top-k 5, ..." of `s`; with `before`, only what differs from it.
std::string SettingsText(const ConversationSettings& s, const ConversationSettings* before) {
  std::string out;
  auto add = [&](bool changed, const std::string& item) {
    if (before != nullptr && !changed) return;
    out += (out.empty() ? "" : ", ") + item;
  };
  add(before && s.sampling.temperature != before->sampling.temperature,
      "temperature " + ShortFloat(s.sampling.temperature));
  add(before && s.sampling.top_k != before->sampling.top_k, Cat("top-k ", s.sampling.top_k));
  add(before && s.sampling.top_p != before->sampling.top_p,
      "top-p " + ShortFloat(s.sampling.top_p));
  add(before && s.seed != before->seed, Cat("seed ", s.seed));
  add(before && s.max_new_tokens != before->max_new_tokens, Cat("max tokens ", s.max_new_tokens));
  if (before != nullptr ? !SameBeams(s, *before) : s.beams.has_value()) add(true, BeamsText(s));
  return out;
}

// Whether a turn ran with other settings than `before` (the system prompt aside): what the
// export shows differs.
bool SameSampling(const ConversationSettings& s, const ConversationSettings& before) {
  return SettingsText(s, &before).empty();
}

// `text` and the blank line after it.
void Paragraph(std::string& out, const std::string& text) {
  out += text;
  out += text.empty() || text.back() != '\n' ? "\n\n" : "\n";
}

ojson SettingsJson(const ConversationSettings& s) {
  ojson j;
  j["temperature"] = JsonFloat(s.sampling.temperature);
  j["top_k"] = s.sampling.top_k;
  j["top_p"] = JsonFloat(s.sampling.top_p);
  j["seed"] = s.seed;
  j["max_tokens"] = s.max_new_tokens;
  if (s.beams)
    j["beams"] = {{"num_beams", s.beams->num_beams},
                  {"length_penalty", JsonFloat(s.beams->length_penalty)},
                  {"early_stopping", s.beams->early_stopping}};
  return j;
}

ojson Message(const char* role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

int FinishedTurns(const ExportContent& c) {
  int n = 0;
  for (const ConversationTurn& t : c.turns) n += t.finished;
  return n;
}

}  // namespace

ExportFormat ExportFormatOf(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (ext == ".md" || ext == ".markdown") return ExportFormat::kMarkdown;
  if (ext == ".json") return ExportFormat::kJson;
  return ExportFormat::kUnknown;
}

std::string ExportMarkdown(const ExportContent& c) {
  std::string out = Cat("# ", c.title.empty() ? std::string("wormchat chat") : c.title, "\n\n");
  out += Cat("- model: ", c.model, "\n- settings: ", SettingsText(c.settings, nullptr), "\n");
  if (c.speculate_k > 0 && c.speculate_mode == "draft")
    out += Cat("- speculation: draft model ", c.draft_model, ", k ", c.speculate_k, "\n");
  else if (c.speculate_k > 0)
    out += Cat("- speculation: prompt lookup, k ", c.speculate_k, ", n-grams up to ",
               c.lookup_ngram, "\n");
  out += "\n";
  if (!c.settings.system.empty()) {
    Paragraph(out, "### System");
    Paragraph(out, c.settings.system);
  }
  const ConversationSettings* before = &c.settings;
  for (const ConversationTurn& t : c.turns) {
    if (!t.finished) continue;
    if (t.reset_before) {
      Paragraph(out, "---");
      Paragraph(out, "*(new conversation)*");
    }
    if (!SameSampling(t.settings, *before))
      Paragraph(out, Cat("*(settings from here: ", SettingsText(t.settings, before), ")*"));
    if (t.settings.system != before->system) {
      if (t.settings.system.empty()) {
        Paragraph(out, "*(no system prompt from here)*");
      } else {
        Paragraph(out, "### System");
        Paragraph(out, t.settings.system);
      }
    }
    Paragraph(out, "### You");
    Paragraph(out, t.user);
    Paragraph(out, "### wormchat");
    Paragraph(out, t.reply_text.empty() ? std::string("*(no reply)*") : t.reply_text);
    before = &t.settings;
  }
  out.pop_back();  // the file ends with one newline, not a blank line
  return out;
}

std::string ExportJson(const ExportContent& c) {
  ojson j;
  j["model"] = c.model;
  j["title"] = c.title;
  j["settings"] = SettingsJson(c.settings);
  if (c.speculate_k > 0 && c.speculate_mode == "draft")
    j["speculation"] = {{"mode", "draft"}, {"k", c.speculate_k}, {"draft_model", c.draft_model}};
  else if (c.speculate_k > 0)
    j["speculation"] = {{"mode", "lookup"}, {"k", c.speculate_k}, {"lookup_ngram", c.lookup_ngram}};
  ojson messages = ojson::array();
  if (!c.settings.system.empty()) messages.push_back(Message("system", c.settings.system));
  const ConversationSettings* before = &c.settings;
  for (const ConversationTurn& t : c.turns) {
    if (!t.finished) continue;
    if (t.settings.system != before->system)
      messages.push_back(Message("system", t.settings.system));
    ojson user = Message("user", t.user);
    if (t.reset_before) user["new_conversation"] = true;
    if (!SameSampling(t.settings, *before)) user["settings"] = SettingsJson(t.settings);
    messages.push_back(std::move(user));
    messages.push_back(Message("assistant", t.reply_text));
    before = &t.settings;
  }
  j["messages"] = std::move(messages);
  return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string ExportChat(const std::string& path, bool force, const ExportContent& c) {
  namespace fs = std::filesystem;
  const ExportFormat format = ExportFormatOf(path);
  if (format == ExportFormat::kUnknown)
    return Cat("not exported: ", path,
               " does not end in .md, .markdown (Markdown) or .json (JSON), which pick the format");
  const std::string file = ExpandHome(path);
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Cat("not exported: ", path, " is a directory");
    if (!force) return Cat("not exported: ", path, " exists (/export! ", path, " overwrites it)");
  }
  const fs::path dir = fs::path(file).parent_path();
  if (!dir.empty()) {
    if (::stat(dir.c_str(), &st) != 0)
      return Cat("not exported: cannot write ", path, ": ", std::strerror(errno), " (",
                 dir.string(), ")");
    if (!S_ISDIR(st.st_mode))
      return Cat("not exported: cannot write ", path, ": ", dir.string(), " is not a directory");
  }
  const std::string why = WriteFileAtomically(
      file, format == ExportFormat::kMarkdown ? ExportMarkdown(c) : ExportJson(c));
  if (!why.empty()) return Cat("not exported: cannot write ", path, ": ", why);
  const int n = FinishedTurns(c);
  return Cat("exported ", n, n == 1 ? " turn" : " turns", " to ", path,
             format == ExportFormat::kMarkdown ? " (Markdown)" : " (JSON)");
}

}  // namespace wc
