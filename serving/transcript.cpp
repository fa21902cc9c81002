#include "serving/transcript.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/mapped_file.h"
#include "util/parse.h"

namespace wc {
namespace {

const char kTurnHeader[] = "--- turn ";

// The settings keys, in the order a header lists them.
// serving/run_options.h declares each but system.
const std::vector<std::string> kBaseKeys = {run_option::kTemperature.name,
                                            run_option::kTopK.name,
                                            run_option::kTopP.name,
                                            run_option::kSeed.name,
                                            run_option::kMaxNewTokensOption.name,
                                            run_option::kBeams.name,
                                            "system"};
const std::vector<std::string> kBeamKeys = {run_option::kLengthPenalty.name,
                                            run_option::kEarlyStopping.name};

bool IsSettingKey(const std::string& key) {
  for (const auto& k : kBaseKeys)
    if (k == key) return true;
  for (const auto& k : kBeamKeys)
    if (k == key) return true;
  return false;
}

long long ParseInteger(const std::string& key, const std::string& value) {
  const std::optional<long long> v = ParseWholeInteger(value);
  if (!v) throw Error(Cat(key, ": '", value, "' is not an integer"));
  return *v;
}

std::string JsonString(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Every setting as `key: value` (the header's lines).
std::vector<std::pair<std::string, std::string>> SettingLines(const ConversationSettings& s) {
  std::vector<std::pair<std::string, std::string>> lines = {
      {"temperature", FormatFloat(s.sampling.temperature)},
      {"top-k", std::to_string(s.sampling.top_k)},
      {"top-p", FormatFloat(s.sampling.top_p)},
      {"seed", std::to_string(s.seed)},
      {"max-new-tokens", std::to_string(s.max_new_tokens)},
      {"beams", std::to_string(s.beams ? s.beams->num_beams : 0)}};
  if (s.beams) {
    lines.push_back({"length-penalty", FormatFloat(s.beams->length_penalty)});
    lines.push_back({"early-stopping", s.beams->early_stopping ? "true" : "false"});
  }
  lines.push_back({"system", JsonString(s.system)});
  return lines;
}

StopReason ParseReason(const std::string& name) {
  for (StopReason r : {StopReason::kEos, StopReason::kStopString, StopReason::kMaxTokens,
                       StopReason::kContextFull, StopReason::kCancelled})
    if (name == StopReasonName(r)) return r;
  throw Error(Cat("end: '", name, "' is not one of eos, stop, length, context, cancelled"));
}

void AppendPrefixed(std::string& out, const char* prefix, const std::string& text) {
  size_t start = 0;
  while (true) {
    const size_t nl = text.find('\n', start);
    const std::string line = text.substr(start, nl == std::string::npos ? nl : nl - start);
    out += line.empty() ? std::string(1, prefix[0]) : Cat(prefix, line);
    out += '\n';
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
}

// An error that already names its file and line.
class LocatedError : public Error {
 public:
  using Error::Error;
};

// Reads one file line by line, keeping the state of the turn being read.
class Parser {
 public:
  explicit Parser(const std::string& path) { t_.path = path; }

  Transcript Run(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      ++line_no_;
      try {
        Line(line);
      } catch (const LocatedError&) {
        throw;
      } catch (const Error& e) {
        throw LocatedError(Cat(t_.path, ":", line_no_, ": ", e.what()));
      }
    }
    ++line_no_;
    try {
      if (in_header_) EndHeader();
      EndTurn();
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& e) {
      throw LocatedError(Cat(t_.path, ":", line_no_, ": ", e.what()));
    }
    return std::move(t_);
  }

 private:
  void Line(const std::string& line) {
    const bool text_line = !line.empty() && (line[0] == '>' || line[0] == '<');
    if (!text_line && (line.empty() || line[0] == '#')) return;
    if (line.rfind(kTurnHeader, 0) == 0) {
      if (in_header_) EndHeader();
      EndTurn();
      const std::string n = line.substr(sizeof kTurnHeader - 1);
      if (ParseInteger("turn", n) != static_cast<long long>(t_.turns.size()) + 1)
        throw Error(Cat("expected '--- turn ", t_.turns.size() + 1, "', got '", line, "'"));
      ConversationTurn turn;
      turn.settings = t_.turns.empty() ? t_.settings : t_.turns.back().settings;
      t_.turns.push_back(std::move(turn));
      t_.turn_lines.push_back(line_no_);
      stage_ = Stage::kBeforeUser;
      user_lines_ = reply_lines_ = 0;
      have_ids_ = have_end_ = false;
      return;
    }
    if (in_header_) return HeaderLine(line);
    TurnLine(line);
  }

  void HeaderLine(const std::string& line) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0)
      throw Error(Cat("expected 'key: value' or '--- turn 1', got '", line, "'"));
    const std::string key = line.substr(0, colon);
    std::string value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    if (!seen_.emplace(key, line_no_).second)
      throw Error(Cat("'", key, ":' is repeated (first on line ", seen_[key], ")"));
    if (key == "wormchat") {
      t_.version = value;
    } else if (key == "model") {
      t_.model = value;
    } else if (key == "architecture") {
      t_.architecture = value;
      t_.architecture_line = line_no_;
    } else if (key == "fingerprint") {
      t_.fingerprint = value;
      t_.fingerprint_line = line_no_;
    } else if (key == "server") {
      if (value.empty()) throw Error("'server:' needs the server's URL");
      t_.server = value;
      t_.server_line = line_no_;
    } else if (key == "model-size") {
      const std::optional<long long> size = ParseWholeInteger(value);
      if (!size || *size < 0) throw Error(Cat("model-size: '", value, "' is not a size in bytes"));
      t_.model_size = *size;
      t_.model_size_line = line_no_;
    } else if (IsSettingKey(key)) {
      settings_[key] = {value, line_no_};
    } else {
      t_.run.push_back({key, value, line_no_});
    }
  }

  // Applies the header's settings in their canonical order (beams before the beam keys).
  void EndHeader() {
    in_header_ = false;
    for (const char* key : {"model", "fingerprint"})
      if (!seen_.count(key) && !(t_.server.size() && std::string(key) == "fingerprint"))
        throw Error(Cat("the header has no '", key, ":' line"));
    if (t_.model.empty())
      throw LocatedError(Cat(t_.path, ":", seen_["model"],
                             ": 'model:' needs `default` (the model in assets/) or a directory"));
    ConversationSettings s;
    auto apply = [&](const std::string& key) {
      const auto it = settings_.find(key);
      try {
        ApplySetting(s, key, it->second.first);
      } catch (const Error& e) {
        throw LocatedError(Cat(t_.path, ":", it->second.second, ": ", e.what()));
      }
    };
    for (const std::string& key : kBaseKeys) {
      if (!settings_.count(key)) throw Error(Cat("the header has no '", key, ":' line"));
      if (key != "system") apply(key);
    }
    for (const std::string& key : kBeamKeys) {
      if (settings_.count(key)) {
        apply(key);
      } else if (s.beams) {
        throw Error(Cat("the header has beams but no '", key, ":' line"));
      }
    }
    apply("system");
    t_.settings = s;
  }

  void TurnLine(const std::string& line) {
    if (t_.turns.empty()) throw Error(Cat("expected '--- turn 1', got '", line, "'"));
    ConversationTurn& turn = t_.turns.back();
    const char c = line[0];
    if (c == '>' || c == '<') {
      if (line.size() > 1 && line[1] != ' ')
        throw Error(Cat("a text line is '", c, " ' + text, or '", c, "' alone for an empty line"));
      const std::string text = line.size() > 1 ? line.substr(2) : "";
      if (c == '>') {
        if (stage_ > Stage::kUser) throw Error("a '>' line after the reply; start a new turn");
        stage_ = Stage::kUser;
        turn.user += (user_lines_++ > 0 ? "\n" : "") + text;
      } else {
        if (stage_ < Stage::kUser) throw Error("a '<' reply line before the '>' user message");
        if (stage_ > Stage::kReply) throw Error("a '<' line after 'ids:' or 'end:'");
        stage_ = Stage::kReply;
        turn.reply_text += (reply_lines_++ > 0 ? "\n" : "") + text;
      }
      return;
    }
    if (line == "reset") {
      if (stage_ != Stage::kBeforeUser) throw Error("'reset' must come before the user message");
      turn.reset_before = true;
      return;
    }
    // "key: value", or "key:" with an empty value (FormatTranscript writes a reply with no
    // tokens as "ids:").
    const size_t colon = line.find(": ");
    std::string key = colon == std::string::npos ? line : line.substr(0, colon);
    const std::string value = colon == std::string::npos ? "" : line.substr(colon + 2);
    if (colon == std::string::npos && key.size() > 1 && key.back() == ':') key.pop_back();
    if (key == "set") {
      if (stage_ != Stage::kBeforeUser) throw Error("'set:' must come before the user message");
      const size_t space = value.find(' ');
      if (space == std::string::npos) throw Error("expected 'set: KEY VALUE'");
      ApplySetting(turn.settings, value.substr(0, space), value.substr(space + 1));
    } else if (key == "ids") {
      if (stage_ < Stage::kUser) throw Error("'ids:' before the '>' user message");
      if (have_ids_) throw Error("'ids:' is repeated");
      std::istringstream in(value);
      std::string word;
      while (in >> word) {
        const long long id = ParseInteger("ids", word);
        if (id < 0 || id > 0x7fffffff) throw Error(Cat("ids: ", id, " is not a token id"));
        turn.reply_ids.push_back(static_cast<int>(id));
      }
      have_ids_ = true;
      stage_ = Stage::kAfterReply;
    } else if (key == "end") {
      if (stage_ < Stage::kUser) throw Error("'end:' before the '>' user message");
      if (have_end_) throw Error("'end:' is repeated");
      turn.reason = ParseReason(value);
      have_end_ = true;
      stage_ = Stage::kAfterReply;
    } else if (key == "dropped") {
      const long long n = ParseInteger("dropped", value);
      if (n < 1 || n >= static_cast<long long>(t_.turns.size()))
        throw Error(Cat("dropped: ", n, " is not a count of earlier turns"));
      turn.dropped_before = static_cast<int>(n);
    } else {
      throw Error(Cat("expected '> ', '< ', 'ids:', 'end:', 'dropped:', 'reset' or 'set:', got '",
                      line, "'"));
    }
  }

  void EndTurn() {
    if (t_.turns.empty()) return;
    ConversationTurn& turn = t_.turns.back();
    if (turn.finished) return;
    const std::string where = Cat(t_.path, ":", t_.turn_lines.back(), ": turn ", t_.turns.size());
    if (user_lines_ == 0) throw LocatedError(Cat(where, " has no '>' user message"));
    if (!have_ids_ && t_.server.empty()) throw LocatedError(Cat(where, " has no 'ids:' line"));
    if (!have_end_) throw LocatedError(Cat(where, " has no 'end:' line"));
    turn.finished = true;
  }

  enum class Stage { kBeforeUser, kUser, kReply, kAfterReply };
  Transcript t_;
  int line_no_ = 0;
  bool in_header_ = true;
  std::map<std::string, int> seen_;                              // header key -> line
  std::map<std::string, std::pair<std::string, int>> settings_;  // key -> value, line
  Stage stage_ = Stage::kBeforeUser;
  int user_lines_ = 0, reply_lines_ = 0;
  bool have_ids_ = false, have_end_ = false;
};

}  // namespace

std::string FormatFloat(float v) {
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

void ApplySetting(ConversationSettings& s, const std::string& key, const std::string& value) {
  ConversationSettings n = s;
  auto need_beams = [&] {
    if (!n.beams) throw Error(Cat(key, " applies to beam search; set beams > 0 first"));
  };
  using namespace run_option;
  if (key == kTemperature.name) {
    n.sampling.temperature = static_cast<float>(kTemperature.ParseNumber(value, key));
  } else if (key == kTopK.name) {
    n.sampling.top_k = static_cast<int>(kTopK.ParseNumber(value, key));
  } else if (key == kTopP.name) {
    n.sampling.top_p = static_cast<float>(kTopP.ParseNumber(value, key));
  } else if (key == kSeed.name) {
    n.seed = kSeed.ParseSeed(value, key);
  } else if (key == kMaxNewTokensOption.name) {
    n.max_new_tokens = static_cast<int>(kMaxNewTokensOption.ParseNumber(value, key));
  } else if (key == kBeams.name) {
    const int w = static_cast<int>(kBeams.ParseNumber(value, key));
    if (w == 0) {
      n.beams.reset();
    } else {
      if (!n.beams) n.beams = BeamParams{};
      n.beams->num_beams = w;
    }
  } else if (key == kLengthPenalty.name) {
    need_beams();
    n.beams->length_penalty = static_cast<float>(kLengthPenalty.ParseNumber(value, key));
  } else if (key == kEarlyStopping.name) {
    need_beams();
    n.beams->early_stopping = kEarlyStopping.ParseSwitch(value, key);
  } else if (key == "system") {
    if (!value.empty() && value[0] == '"') {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(value);
      } catch (const std::exception&) {
      }
      if (!j.is_string()) throw Error(Cat("system: ", value, " is not one JSON string"));
      n.system = j.get<std::string>();
    } else {
      n.system = value;
    }
  } else {
    std::string names;
    for (const auto* keys : {&kBaseKeys, &kBeamKeys})
      for (const std::string& k : *keys) names += (names.empty() ? "" : ", ") + k;
    throw Error(Cat("'", key, "' is not a setting; the settings are ", names));
  }
  n.Validate();
  s = std::move(n);
}

std::vector<std::pair<std::string, std::string>> SettingChanges(const ConversationSettings& from,
                                                                const ConversationSettings& to) {
  std::vector<std::pair<std::string, std::string>> changes;
  // A beam setting not written for `from` reads as BeamParams' default once beams are set.
  ConversationSettings base = from;
  if (to.beams && !base.beams) {
    base.beams = BeamParams{};
    base.beams->num_beams = 0;
  }
  const auto a = SettingLines(base), b = SettingLines(to);
  for (const auto& [key, value] : b) {
    bool same = false;
    for (const auto& [k, v] : a) same |= k == key && v == value;
    if (!same) changes.push_back({key, value});
  }
  return changes;
}

Transcript ParseTranscript(const std::string& text, const std::string& path) {
  return Parser(path).Run(text);
}

Transcript ReadTranscriptFile(const std::string& path) {
  return ParseTranscript(ReadTextFile(path), path);
}

std::string FormatTranscript(const Transcript& t) {
  std::string out = "# wormchat transcript: replay with `wormchat transcript replay FILE`\n";
  auto header = [&out](const std::string& key, const std::string& value) {
    if (value.find('\n') != std::string::npos)
      throw Error(Cat("transcript header '", key, "' cannot hold a line break: '", value, "'"));
    out += Cat(key, ": ", value, "\n");
  };
  header("wormchat", t.version);
  header("model", t.model);
  if (!t.architecture.empty()) header("architecture", t.architecture);
  if (!t.server.empty()) header("server", t.server);
  if (t.server.empty() || !t.fingerprint.empty()) header("fingerprint", t.fingerprint);
  if (t.model_size >= 0) header("model-size", std::to_string(t.model_size));
  for (const TranscriptOption& o : t.run) header(o.key, o.value);
  for (const auto& [key, value] : SettingLines(t.settings)) header(key, value);
  const ConversationSettings* previous = &t.settings;
  int n = 0;
  for (const ConversationTurn& turn : t.turns) {
    if (!turn.finished) continue;
    out += Cat("\n--- turn ", ++n, "\n");
    if (turn.reset_before) out += "reset\n";
    for (const auto& [key, value] : SettingChanges(*previous, turn.settings))
      out += Cat("set: ", key, " ", value, "\n");
    previous = &turn.settings;
    AppendPrefixed(out, "> ", turn.user);
    AppendPrefixed(out, "< ", turn.reply_text);
    if (t.server.empty() || !turn.reply_ids.empty()) {
      out += "ids:";
      for (int id : turn.reply_ids) out += Cat(" ", id);
      out += "\n";
    }
    out += Cat("end: ", StopReasonName(turn.reason), "\n");
    if (turn.dropped_before > 0) out += Cat("dropped: ", turn.dropped_before, "\n");
  }
  return out;
}

void WriteTranscriptFile(const std::string& path, const Transcript& t) {
  const std::string text = FormatTranscript(t);
  const std::string tmp = Cat(path, ".tmp.", getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw Error(Cat(path, ": cannot write: ", std::strerror(errno)));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(Cat(path, ": cannot write: ", why));
  }
}

}  // namespace wc
