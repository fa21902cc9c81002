#include "app/chat/chat_commands.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "app/chat/typed_path.h"
#include "serving/beam_search.h"
#include "serving/run_options.h"
#include "util/error.h"
#include "util/nearest_name.h"

namespace wc {
namespace {

struct CommandSpec {
  const char* name;
  ChatCommand::Kind kind;
};

const CommandSpec kCommands[] = {
    {"/help", ChatCommand::Kind::kHelp},     {"/reset", ChatCommand::Kind::kReset},
    {"/set", ChatCommand::Kind::kSet},       {"/beams", ChatCommand::Kind::kBeams},
    {"/stats", ChatCommand::Kind::kStats},   {"/mesh", ChatCommand::Kind::kMesh},
    {"/save", ChatCommand::Kind::kSave},     {"/load", ChatCommand::Kind::kLoad},
    {"/quit", ChatCommand::Kind::kQuit},     {"/bye", ChatCommand::Kind::kQuit},
    {"/retry", ChatCommand::Kind::kRetry},   {"/undo", ChatCommand::Kind::kUndo},
    {"/edit", ChatCommand::Kind::kEdit},     {"/title", ChatCommand::Kind::kTitle},
    {"/forget", ChatCommand::Kind::kForget}, {"/chats", ChatCommand::Kind::kChats},
    {"/export", ChatCommand::Kind::kExport}, {"/export!", ChatCommand::Kind::kExport},
    {"/copy", ChatCommand::Kind::kCopy},     {"/open", ChatCommand::Kind::kOpen},
    {"/find", ChatCommand::Kind::kFind},
};

// The commands whose argument is a file name (Tab completes it).
const char* const kFileCommands[] = {"/export", "/export!", "/save", "/load"};

// What /set sets: run options (serving/run_options.h) by their names - max-tokens is the chat's
// name for max-new-tokens, both accepted - and render, the full-screen chat's own.
struct Setting {
  const char* name;
  const RunOptionSpec* spec;  // nullptr: render
};
const Setting kSettings[] = {
    {"temperature", &run_option::kTemperature},
    {"top-k", &run_option::kTopK},
    {"top-p", &run_option::kTopP},
    {"seed", &run_option::kSeed},
    {"max-tokens", &run_option::kMaxNewTokensOption},
    {"max-new-tokens", &run_option::kMaxNewTokensOption},
    {"render", nullptr},
    {"speculate", &run_option::kSpeculate},
    {"speculate-k", &run_option::kSpeculateK},
    {"lookup-ngram", &run_option::kLookupNgram},
};

std::string SettingNames() {
  std::string names;
  for (const Setting& s : kSettings)
    if (std::string(s.name) != "max-new-tokens") names += Cat(names.empty() ? "" : ", ", s.name);
  return names;
}

ChatCommand Hint(std::string text) {
  ChatCommand c;
  c.kind = ChatCommand::Kind::kHint;
  c.text = std::move(text);
  return c;
}

// The whole of `word` as a number, or false.
bool ParseNumber(const std::string& word, double& out) {
  if (word.empty()) return false;
  char* end = nullptr;
  out = std::strtod(word.c_str(), &end);
  return end == word.c_str() + word.size() && std::isfinite(out);
}

bool IsInteger(double v) {
  return v == std::floor(v);
}

// `word` as a whole number in [1, 1e9], or false.
bool ParseCount(const std::string& word, double& out) {
  return ParseNumber(word, out) && IsInteger(out) && out >= 1 && out <= 1e9;
}

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

ChatCommand ParseCopy(const std::vector<std::string>& words) {
  ChatCommand c;
  c.kind = ChatCommand::Kind::kCopy;
  if (words.size() == 1) return c;
  double n = 1;
  if (Lower(words[1]) == "code" &&
      (words.size() == 2 || (words.size() == 3 && ParseCount(words[2], n)))) {
    c.name = "code";
    c.value = n;
    return c;
  }
  return Hint(
      "/copy takes nothing (the last reply) or code N (its Nth code block; N = 1 if left out)");
}

ChatCommand ParseSet(const std::vector<std::string>& words) {
  if (words.size() != 3)
    return Hint(Cat("/set needs a setting and a value, e.g. /set temperature 0.7 (settings: ",
                    SettingNames(), ")"));
  const Setting* setting = nullptr;
  for (const Setting& s : kSettings)
    if (words[1] == s.name) setting = &s;
  if (setting == nullptr)
    return Hint(Cat("/set: unknown setting '", words[1], "'; settings: ", SettingNames()));
  ChatCommand c;
  c.kind = ChatCommand::Kind::kSet;
  c.name = setting->spec == &run_option::kMaxNewTokensOption ? "max-tokens" : setting->name;
  const std::string& value = words[2];
  const std::string label = Cat("/set ", words[1]);
  if (setting->spec == nullptr) {  // render: the full-screen chat's, not the conversation's
    if (value != "markdown" && value != "plain")
      return Hint(Cat(label, " must be markdown or plain, got ", value));
    c.value = value == "markdown" ? 1 : 0;
    return c;
  }
  const RunOptionSpec& spec = *setting->spec;
  try {
    switch (spec.kind) {
      case RunOptionKind::kChoice:  // speculate: how the next replies decode, not which tokens
        c.path = spec.ParseChoice(value, label);
        break;
      case RunOptionKind::kSeed:
        // Exact digits: a double cannot hold every 64-bit seed.
        c.path = std::to_string(spec.ParseSeed(value, label));
        c.value = static_cast<double>(std::stoull(c.path));
        break;
      default:
        c.value = spec.ParseNumber(value, label);
        if (&spec == &run_option::kMaxNewTokensOption && c.value < 1)
          return Hint(
              Cat(label, " must be >= 1 in a chat (a reply has a token at least), got ", value));
        break;
    }
  } catch (const Error& e) {
    return Hint(e.what());
  }
  return c;
}

}  // namespace

ChatCommand ParseChatCommand(const std::string& line, std::string* message) {
  const size_t first = line.find_first_not_of(" \t");
  if (first == std::string::npos || line[first] != '/' ||
      (first + 1 < line.size() && line[first + 1] == '/')) {
    if (message != nullptr)
      *message = first != std::string::npos && line.compare(first, 2, "//") == 0
                     ? line.substr(first + 1)
                     : line;
    return {};
  }
  std::istringstream in(line.substr(first));
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  words[0] = Lower(words[0]);
  const std::string& name = words[0];  // /QUIT is /quit
  for (const CommandSpec& spec : kCommands) {
    if (name != spec.name) continue;
    ChatCommand c;
    c.kind = spec.kind;
    switch (spec.kind) {
      case ChatCommand::Kind::kSet:
        return ParseSet(words);
      case ChatCommand::Kind::kBeams: {
        if (words.size() != 2)
          return Hint(Cat("/beams needs a number of beams: ", run_option::kBeams.Accepts()));
        try {
          c.value = run_option::kBeams.ParseNumber(words[1], "/beams");
        } catch (const Error& e) {
          return Hint(e.what());
        }
        return c;
      }
      case ChatCommand::Kind::kRetry:
        if (words.size() == 1) return c;
        if (words.size() == 2 && words[1] == "same") {
          c.value = 1;
          return c;
        }
        return Hint("/retry takes nothing, or 'same' (the same seed as the reply it replaces)");
      case ChatCommand::Kind::kCopy:
        return ParseCopy(words);
      case ChatCommand::Kind::kOpen: {
        double n = 0;
        if (words.size() != 2 || !ParseCount(words[1], n))
          return Hint("/open needs the number of a chat in the /chats list, e.g. /open 2");
        c.value = n;
        return c;
      }
      case ChatCommand::Kind::kSave:
      case ChatCommand::Kind::kTitle:
      case ChatCommand::Kind::kLoad:
      case ChatCommand::Kind::kExport:
      case ChatCommand::Kind::kFind: {
        // The argument is the rest of the line (a file name may contain spaces).
        const size_t at = first + name.size();
        const size_t start = line.find_first_not_of(" \t", at);
        if (start == std::string::npos) {
          switch (spec.kind) {
            case ChatCommand::Kind::kTitle:
              return Hint("/title needs a title");
            case ChatCommand::Kind::kExport:
              return Hint(
                  Cat(name,
                      " needs a file name: FILE.md (Markdown) or FILE.json (JSON); /export! "
                      "FILE overwrites one"));
            case ChatCommand::Kind::kFind:
              return Hint("/find needs the text to look for (Ctrl-F finds as you type)");
            default:
              return Hint(Cat(name, " needs a file name"));
          }
        }
        std::string arg = line.substr(start);
        while (!arg.empty() && (arg.back() == ' ' || arg.back() == '\t')) arg.pop_back();
        if (spec.kind == ChatCommand::Kind::kFind) {
          c.text = std::move(arg);
        } else {
          c.path = std::move(arg);
        }
        if (spec.kind == ChatCommand::Kind::kExport) c.value = name == "/export!" ? 1 : 0;
        return c;
      }
      default:
        if (words.size() != 1) return Hint(Cat(name, " takes no arguments"));
        return c;
    }
  }
  std::vector<std::string> names;
  for (const CommandSpec& spec : kCommands) names.push_back(spec.name);
  const std::string near = NearestName(name, names);
  return Hint(Cat("unknown command ", name, near.empty() ? "" : Cat("; did you mean ", near, "?"),
                  ": /help lists them"));
}

std::vector<std::string> CompleteChatCommand(const std::string& prefix) {
  std::vector<std::string> out;
  const size_t space = prefix.find_first_of(" \t");
  if (space != std::string::npos) {
    const std::string word = Lower(prefix.substr(0, space));
    for (const char* command : kFileCommands) {
      if (word != command) continue;
      const size_t start = std::min(prefix.find_first_not_of(" \t", space), prefix.size());
      const std::string head = prefix.substr(0, start);
      for (const std::string& name : FileNameCandidates(prefix.substr(start)))
        out.push_back(head + name);
      if (out.size() > 1) {
        const std::string common = CommonPrefix(out);
        if (common.size() > prefix.size()) return {common};
      }
      return out;
    }
  }
  if (prefix.rfind("/set ", 0) == 0) {
    const std::string partial = prefix.substr(5);
    if (partial.find(' ') != std::string::npos) return out;
    for (const Setting& s : kSettings)  // max-new-tokens is max-tokens' second name: not offered
      if (std::string(s.name) != "max-new-tokens" && std::string(s.name).rfind(partial, 0) == 0)
        out.push_back(Cat("/set ", s.name, " "));
    return out;
  }
  if (prefix.empty() || prefix[0] != '/' || prefix.find(' ') != std::string::npos) return out;
  for (const CommandSpec& spec : kCommands)
    if (std::string(spec.name).rfind(prefix, 0) == 0) {
      const bool takes_args =
          spec.kind == ChatCommand::Kind::kSet || spec.kind == ChatCommand::Kind::kBeams ||
          spec.kind == ChatCommand::Kind::kSave || spec.kind == ChatCommand::Kind::kLoad ||
          spec.kind == ChatCommand::Kind::kTitle || spec.kind == ChatCommand::Kind::kExport ||
          spec.kind == ChatCommand::Kind::kOpen || spec.kind == ChatCommand::Kind::kFind;
      out.push_back(std::string(spec.name) + (takes_args ? " " : ""));
    }
  return out;
}

const char* ChatHelpText() {
  return "/help                 this list\n"
         "/reset                start a new conversation\n"
         "/set NAME VALUE       temperature, top-k, top-p, seed or max-tokens for the next "
         "replies\n"
         "/set render MODE      show replies as rendered markdown or plain text\n"
         "/set speculate MODE   off, lookup or draft (with --draft-model): decode several tokens "
         "a step from earlier text or a draft model (same tokens; speculate-k N, lookup-ngram N "
         "tune it)\n"
         "/beams W              reply by beam search with W beams (1-16); /beams 0 samples again\n"
         "/stats                speed, context and KV cache figures of the last reply\n"
         "/mesh                 show or hide the Wormhole mesh and KV cache panel\n"
         "/save FILE            write the conversation as a transcript (wormchat transcript "
         "replay)\n"
         "/load FILE            replay a transcript's user turns into this conversation\n"
         "/retry                a new reply to the last message (the stream's next seed)\n"
         "/retry same           the last reply again from the same seed (after a /set)\n"
         "/undo                 remove the last exchange (the seed stream goes back)\n"
         "/edit                 remove the last exchange and put its message back to change\n"
         "/chats                the saved chats, newest first (wormchat chat --resume NAME)\n"
         "/title TEXT           rename this chat (its file too)\n"
         "/forget               delete this chat's file and save no more of it\n"
         "/open N               continue chat N of the /chats list\n"
         "/export FILE          write the chat to FILE.md (Markdown) or FILE.json (OpenAI-style "
         "messages)\n"
         "/export! FILE         the same, overwriting FILE if it exists\n"
         "/copy                 the last reply to the clipboard (OSC 52: over ssh and in tmux "
         "too)\n"
         "/copy code [N]        the last reply's Nth code block (without N: the first)\n"
         "/find TEXT            find TEXT in the chat (n / N: older / newer match, Esc leaves)\n"
         "/quit, /bye           leave (Ctrl-D on an empty line too)\n"
         "\"\"\"                   on a line of its own: start or end a multi-line message\n"
         "//text                send a message that starts with /\n"
         "Tab                   complete a command, setting or file name\n"
         "Ctrl-F                find in the chat as you type; n / N: next / previous match; Esc "
         "leaves find\n"
         "Ctrl-R                search the messages sent before (again: older; Enter sends; Esc "
         "edits; Ctrl-G gives the line back)\n"
         "PgUp, PgDn            scroll the chat (Home, End on an empty line: top, bottom)\n"
         "mouse wheel           scroll the chat (select text with Shift held; --no-mouse to "
         "leave the mouse to the terminal)\n";
}

}  // namespace wc
