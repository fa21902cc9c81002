#include "app/tui/syntax_highlight.h"

#include <srchilite/formatter.h>
#include <srchilite/formattermanager.h>
#include <srchilite/formatterparams.h>
#include <srchilite/langdefmanager.h>
#include <srchilite/langmap.h>
#include <srchilite/regexrulefactory.h>
#include <srchilite/settings.h>
#include <srchilite/sourcehighlighter.h>

#include <cctype>
#include <map>
#include <memory>
#include <utility>

namespace wc::tui {
namespace {

// Names fences use that lang.map does not list, to a name it does.
const std::map<std::string, std::string, std::less<>> kAliases = {
    {"c++", "cpp"},
    {"python3", "python"},
    {"py3", "python"},
    {"console", "sh"},
    {"shellsession", "sh"},
    {"ts", "javascript"},
    {"typescript", "javascript"},
    {"jsx", "javascript"},
    {"tsx", "javascript"},
    {"mjs", "javascript"},
    {"node", "javascript"},
    {"rust", "rs"},
    {"golang", "go"},
    {"make", "makefile"},
    {"toml", "ini"},
    {"c#", "csharp"},
    {"patch", "diff"},
    {"postgresql", "sql"},
    {"mysql", "sql"},
    {"sqlite", "sql"},
};

// source-highlight's element names, to classes; other elements are normal text (so is the element
// a few languages give marker words inside comments: those words show uncoloured).
const std::map<std::string, SyntaxClass> kElements = {
    {"keyword", SyntaxClass::kKeyword},     {"type", SyntaxClass::kType},
    {"usertype", SyntaxClass::kType},       {"classname", SyntaxClass::kType},
    {"string", SyntaxClass::kString},       {"regexp", SyntaxClass::kString},
    {"comment", SyntaxClass::kComment},     {"number", SyntaxClass::kNumber},
    {"preproc", SyntaxClass::kPreproc},     {"function", SyntaxClass::kFunction},
    {"symbol", SyntaxClass::kSymbol},       {"cbracket", SyntaxClass::kSymbol},
    {"specialchar", SyntaxClass::kSpecial}, {"variable", SyntaxClass::kVariable},
};

// Records the pieces of one line as source-highlight formats them: `params->start` is the byte
// offset of a piece in the line being highlighted.
class SpanFormatter : public srchilite::Formatter {
 public:
  SpanFormatter(SyntaxClass cls, std::vector<SyntaxSpan>** sink) : cls_(cls), sink_(sink) {}

  void format(const std::string& s, const srchilite::FormatterParams* params) override {
    if (cls_ == SyntaxClass::kNone || s.empty() || params == nullptr || params->start < 0) return;
    const size_t begin = static_cast<size_t>(params->start);
    std::vector<SyntaxSpan>& spans = **sink_;
    if (!spans.empty() && spans.back().cls == cls_ && spans.back().end == begin) {
      spans.back().end = begin + s.size();
    } else {
      spans.push_back({begin, begin + s.size(), cls_});
    }
  }

 private:
  SyntaxClass cls_;
  std::vector<SyntaxSpan>** sink_;  // where the line being highlighted puts its spans
};

// The language definitions of one data directory, loaded on first use.
struct DataDir {
  std::unique_ptr<srchilite::LangMap> lang_map;  // null when lang.map could not be read
  srchilite::RegexRuleFactory rule_factory;
  std::unique_ptr<srchilite::LangDefManager> manager;
  // lang.map name -> its definitions; a null pointer records a language that failed to load.
  std::map<std::string, srchilite::HighlightStatePtr> states;
};

DataDir& LoadDataDir(const std::string& dir) {
  static std::map<std::string, std::unique_ptr<DataDir>> dirs;
  std::unique_ptr<DataDir>& d = dirs[dir];
  if (d) return *d;
  d = std::make_unique<DataDir>();
  d->manager = std::make_unique<srchilite::LangDefManager>(&d->rule_factory);
  try {
    auto map = std::make_unique<srchilite::LangMap>(dir, "lang.map");
    map->open();
    d->lang_map = std::move(map);
  } catch (...) {
    d->lang_map.reset();
  }
  return *d;
}

// "Python3 {.numberLines}" -> "python3": the info string's first word, lower case.
std::string LanguageKey(std::string_view language) {
  std::string key;
  for (const char c : language) {
    if (c == ' ' || c == '\t' || c == ',' || c == '{' || c == '\r' || c == '\n') {
      if (key.empty()) continue;
      break;
    }
    key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (!key.empty() && key[0] == '.') key.erase(0, 1);  // "{.python}" style
  return key;
}

// The highlight state for `language` in `d`, or null when it is unknown or fails to load.
srchilite::HighlightStatePtr StateFor(DataDir& d, const std::string& dir,
                                      std::string_view language) {
  if (!d.lang_map) return {};
  std::string key = LanguageKey(language);
  if (const auto alias = kAliases.find(key); alias != kAliases.end()) key = alias->second;
  if (key.empty()) return {};
  if (const auto it = d.states.find(key); it != d.states.end()) return it->second;
  srchilite::HighlightStatePtr state;
  try {
    const std::string file = d.lang_map->getMappedFileName(key);
    if (!file.empty()) state = d.manager->getHighlightState(dir, file);
  } catch (...) {
    state.reset();
  }
  d.states[key] = state;
  return state;
}

const std::string& DefaultDataDir() {
  static const std::string dir = [] {
    try {
      return srchilite::Settings::retrieveDataDir();
    } catch (...) {
      return std::string();
    }
  }();
  return dir;
}

}  // namespace

struct CodeHighlighter::Impl {
  std::vector<SyntaxSpan>* sink = nullptr;  // where the line being highlighted puts its spans
  srchilite::FormatterManager formatters{
      srchilite::FormatterPtr(new SpanFormatter(SyntaxClass::kNone, &sink))};
  srchilite::FormatterParams params;
  srchilite::SourceHighlighter highlighter;

  explicit Impl(srchilite::HighlightStatePtr state) : highlighter(state) {
    for (const auto& [name, cls] : kElements) {
      formatters.addFormatter(name, srchilite::FormatterPtr(new SpanFormatter(cls, &sink)));
    }
    highlighter.setFormatterManager(&formatters);
    highlighter.setFormatterParams(&params);
  }

  std::vector<SyntaxSpan> Highlight(const std::string& line) {
    std::vector<SyntaxSpan> spans;
    sink = &spans;
    // With its newline, as source-highlight reads a file: rules that end at the line's end (a
    // '#' comment) close there.
    highlighter.highlightParagraph(line + "\n");
    sink = nullptr;
    while (!spans.empty() && spans.back().begin >= line.size()) spans.pop_back();
    if (!spans.empty() && spans.back().end > line.size()) spans.back().end = line.size();
    return spans;
  }
};

CodeHighlighter::CodeHighlighter(std::string_view language)
    : CodeHighlighter(language, DefaultDataDir()) {}

CodeHighlighter::CodeHighlighter(std::string_view language, const std::string& data_dir) {
  try {
    const srchilite::HighlightStatePtr state = StateFor(LoadDataDir(data_dir), data_dir, language);
    if (state) impl_ = std::make_unique<Impl>(state);
  } catch (...) {
    impl_.reset();
  }
}

CodeHighlighter::~CodeHighlighter() = default;

std::vector<SyntaxSpan> CodeHighlighter::Next(const std::string& line) {
  if (!impl_) return {};
  try {
    return impl_->Highlight(line);
  } catch (...) {
    impl_.reset();  // a broken definition: no colours from here on
    return {};
  }
}

std::vector<SyntaxSpan> CodeHighlighter::Peek(const std::string& line) {
  if (!impl_) return {};
  srchilite::SourceHighlighter& h = impl_->highlighter;
  const srchilite::HighlightStatePtr state = h.getCurrentState();
  const srchilite::HighlightStateStackPtr stack = h.getStateStack();
  const srchilite::HighlightStateStackPtr saved =
      stack ? srchilite::HighlightStateStackPtr(new srchilite::HighlightStateStack(*stack)) : stack;
  std::vector<SyntaxSpan> spans = Next(line);
  if (impl_) {
    h.setCurrentState(state);
    h.setStateStack(saved);
  }
  return spans;
}

std::optional<std::vector<std::vector<SyntaxSpan>>> HighlightCodeFrom(
    const std::string& data_dir, std::string_view language, const std::vector<std::string>& lines) {
  CodeHighlighter highlighter(language, data_dir);
  if (!highlighter.known()) return std::nullopt;
  std::vector<std::vector<SyntaxSpan>> out;
  for (const std::string& line : lines) {
    out.push_back(highlighter.Next(line));
    if (!highlighter.known()) return std::nullopt;
  }
  return out;
}

std::optional<std::vector<std::vector<SyntaxSpan>>> HighlightCode(
    std::string_view language, const std::vector<std::string>& lines) {
  return HighlightCodeFrom(DefaultDataDir(), language, lines);
}

}  // namespace wc::tui
