#include "serving/run_options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/error.h"
#include "util/parse.h"

namespace wc {
namespace {

// A bound too large to be one anybody means ("a number >= 0", not "in [0, 3.4e38]").
bool Unbounded(double max) {
  return max >= 1e9;
}

}  // namespace

std::string FormatRunNumber(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return Cat(static_cast<long long>(v));
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v ||
        static_cast<float>(std::strtod(buf, nullptr)) == static_cast<float>(v))
      break;
  }
  return buf;
}

std::string RunOptionSpec::Accepts() const {
  std::string s;
  switch (kind) {
    case RunOptionKind::kNumber:
    case RunOptionKind::kCount: {
      const char* what = kind == RunOptionKind::kCount ? "a whole number" : "a number";
      if (Unbounded(max))
        s = Cat(what, min_open ? " > " : " >= ", FormatRunNumber(min));
      else if (kind == RunOptionKind::kCount)
        s = Cat(what, " in ", FormatRunNumber(min), "-", FormatRunNumber(max));
      else
        s = Cat(what, " in ", min_open ? "(" : "[", FormatRunNumber(min), ", ",
                FormatRunNumber(max), "]");
      break;
    }
    case RunOptionKind::kSeed:
      s = "a whole number in [0, 2^64)";
      break;
    case RunOptionKind::kChoice: {
      int n = 0;
      while (n < static_cast<int>(choices.size()) && choices[n] != nullptr) ++n;
      for (int i = 0; i < n; ++i) s += Cat(i == 0 ? "" : i + 1 == n ? " or " : ", ", choices[i]);
      break;
    }
    case RunOptionKind::kSwitch:
      s = "true or false";
      break;
  }
  if (meaning != nullptr) s += Cat(" (", meaning, ")");
  return s;
}

bool RunOptionSpec::Holds(double v) const {
  if (!std::isfinite(v)) return false;
  if (kind == RunOptionKind::kCount && v != std::floor(v)) return false;
  if (min_open ? !(v > min) : !(v >= min)) return false;
  return v <= max;
}

std::string RunOptionSpec::Refusal(const std::string& label, const std::string& got) const {
  return Cat(label, " must be ", Accepts(), ", got ", got.empty() ? "nothing" : got);
}

double RunOptionSpec::ParseNumber(const std::string& text, const std::string& label) const {
  WC_CHECK(kind == RunOptionKind::kNumber || kind == RunOptionKind::kCount, name,
           " is not a number option");
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  const bool whole_text = !text.empty() && end == text.c_str() + text.size() &&
                          text.find_first_of(" \t\n") == std::string::npos;
  if (!whole_text || errno == ERANGE || !Holds(v)) throw Error(Refusal(label, text));
  return v;
}

uint64_t RunOptionSpec::ParseSeed(const std::string& text, const std::string& label) const {
  const std::optional<uint64_t> v = ParseWholeUnsigned(text);
  if (!v) throw Error(Refusal(label, text));
  return *v;
}

std::string RunOptionSpec::ParseChoice(const std::string& text, const std::string& label) const {
  for (const char* c : choices)
    if (c != nullptr && text == c) return text;
  throw Error(Refusal(label, text));
}

bool RunOptionSpec::ParseSwitch(const std::string& text, const std::string& label) const {
  if (text == "true") return true;
  if (text == "false") return false;
  throw Error(Refusal(label, text));
}

std::string RunOptionSpec::ParseText(const std::string& text, const std::string& label) const {
  switch (kind) {
    case RunOptionKind::kNumber:
    case RunOptionKind::kCount:
      return FormatRunNumber(ParseNumber(text, label));
    case RunOptionKind::kSeed:
      return Cat(ParseSeed(text, label));
    case RunOptionKind::kChoice:
      return ParseChoice(text, label);
    case RunOptionKind::kSwitch:
      return ParseSwitch(text, label) ? "true" : "false";
  }
  return text;
}

void RunOptionSpec::Check(double v, const std::string& label) const {
  if (!Holds(v)) throw Error(Refusal(label, FormatRunNumber(v)));
}

std::string RunOptionSpec::DefaultText() const {
  switch (kind) {
    case RunOptionKind::kChoice:
      return default_choice;
    case RunOptionKind::kSwitch:
      return default_number != 0 ? "true" : "false";
    default:
      return FormatRunNumber(default_number);
  }
}

const std::vector<const RunOptionSpec*>& RunOptions() {
  using namespace run_option;
  static const std::vector<const RunOptionSpec*> all = {
      &kTemperature,   &kTopK,          &kTopP,      &kSeed,       &kMaxNewTokensOption, &kBeams,
      &kLengthPenalty, &kEarlyStopping, &kSpeculate, &kSpeculateK, &kLookupNgram};
  return all;
}

const RunOptionSpec* FindRunOption(const std::string& name) {
  for (const RunOptionSpec* o : RunOptions())
    if (name == o->name) return o;
  return nullptr;
}

}  // namespace wc
