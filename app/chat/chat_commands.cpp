#include "app/chat/chat_commands.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "app/cli_errors.h"
#include "serving/beam_search.h"
#include "util/error.h"

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
};

const char* const kSettings[] = {"temperature", "top-k", "top-p", "seed", "max-tokens"};

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

ChatCommand ParseSet(const std::vector<std::string>& words) {
  if (words.size() != 3)
    return Hint(
        "/set needs a setting and a value, e.g. /set temperature 0.7 (settings: "
        "temperature, top-k, top-p, seed, max-tokens)");
  const std::string& name = words[1];
  double v = 0;
  if (!ParseNumber(words[2], v))
    return Hint(Cat("/set ", name, ": '", words[2], "' is not a number"));
  if (name == "temperature") {
    if (v < 0) return Hint(Cat("/set temperature must be >= 0 (0 = greedy), got ", words[2]));
  } else if (name == "top-k") {
    if (v < 0 || !IsInteger(v) || v > 1e9)
      return Hint(Cat("/set top-k must be a whole number >= 0 (0 = no limit), got ", words[2]));
  } else if (name == "top-p") {
    if (!(v > 0 && v <= 1)) return Hint(Cat("/set top-p must be in (0, 1], got ", words[2]));
  } else if (name == "seed") {
    if (v < 0 || !IsInteger(v) || v >= 18446744073709551616.0)
      return Hint(Cat("/set seed must be a whole number >= 0, got ", words[2]));
  } else if (name == "max-tokens") {
    if (v < 1 || !IsInteger(v) || v > 1e9)
      return Hint(Cat("/set max-tokens must be a whole number >= 1, got ", words[2]));
  } else {
    return Hint(Cat("/set: unknown setting '", name,
                    "'; settings: temperature, top-k, top-p, seed, max-tokens"));
  }
  ChatCommand c;
  c.kind = ChatCommand::Kind::kSet;
  c.name = name;
  c.value = v;
  if (name == "seed") c.path = words[2];  // exact digits: a double cannot hold every 64-bit seed
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
  for (char& ch : words[0]) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const std::string& name = words[0];  // /QUIT is /quit
  for (const CommandSpec& spec : kCommands) {
    if (name != spec.name) continue;
    ChatCommand c;
    c.kind = spec.kind;
    switch (spec.kind) {
      case ChatCommand::Kind::kSet:
        return ParseSet(words);
      case ChatCommand::Kind::kBeams: {
        double w = 0;
        if (words.size() != 2 || !ParseNumber(words[1], w) || !IsInteger(w) || w < 0 ||
            w > kMaxBeams)
          return Hint(
              Cat("/beams needs a number of beams in [1, ", kMaxBeams, "] (0: sample again)"));
        c.value = w;
        return c;
      }
      case ChatCommand::Kind::kRetry:
        if (words.size() == 1) return c;
        if (words.size() == 2 && words[1] == "same") {
          c.value = 1;
          return c;
        }
        return Hint("/retry takes nothing, or 'same' (the same seed as the reply it replaces)");
      case ChatCommand::Kind::kSave:
      case ChatCommand::Kind::kTitle:
      case ChatCommand::Kind::kLoad: {
        // The file name is the rest of the line (it may contain spaces).
        const size_t at = first + name.size();
        const size_t start = line.find_first_not_of(" \t", at);
        if (start == std::string::npos)
          return Hint(Cat(name, spec.kind == ChatCommand::Kind::kTitle ? " needs a title"
                                                                       : " needs a file name"));
        c.path = line.substr(start);
        while (!c.path.empty() && (c.path.back() == ' ' || c.path.back() == '\t'))
          c.path.pop_back();
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
  if (prefix.rfind("/set ", 0) == 0) {
    const std::string partial = prefix.substr(5);
    if (partial.find(' ') != std::string::npos) return out;
    for (const char* s : kSettings)
      if (std::string(s).rfind(partial, 0) == 0) out.push_back(std::string("/set ") + s + " ");
    return out;
  }
  if (prefix.empty() || prefix[0] != '/' || prefix.find(' ') != std::string::npos) return out;
  for (const CommandSpec& spec : kCommands)
    if (std::string(spec.name).rfind(prefix, 0) == 0) {
      const bool takes_args =
          spec.kind == ChatCommand::Kind::kSet || spec.kind == ChatCommand::Kind::kBeams ||
          spec.kind == ChatCommand::Kind::kSave || spec.kind == ChatCommand::Kind::kLoad ||
          spec.kind == ChatCommand::Kind::kTitle;
      out.push_back(std::string(spec.name) + (takes_args ? " " : ""));
    }
  return out;
}

const char* ChatHelpText() {
  return "/help                 this list\n"
         "/reset                start a new conversation\n"
         "/set NAME VALUE       temperature, top-k, top-p, seed or max-tokens for the next "
         "replies\n"
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
         "/quit, /bye           leave (Ctrl-D on an empty line too)\n"
         "\"\"\"                   on a line of its own: start or end a multi-line message\n"
         "//text                send a message that starts with /\n";
}

}  // namespace wc
