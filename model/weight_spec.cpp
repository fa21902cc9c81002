#include "model/weight_spec.h"

#include <vector>

#include "util/error.h"

namespace wc {
namespace {

const char kFormats[] = "choose auto, f32, bf16, bfp8 or bfp4";

std::optional<WeightFormat> ParseFormat(const std::string& spec, const std::string& name) {
  if (name == "auto") return std::nullopt;
  const std::optional<WeightFormat> f = WeightFormatFromName(name);
  if (!f || *f == WeightFormat::kF16)
    throw Error(Cat("--weights '", spec, "': unknown format '", name, "'; ", kFormats));
  return f;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    parts.push_back(
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

}  // namespace

const char* WeightGroupName(WeightGroup g) {
  switch (g) {
    case WeightGroup::kAttn:
      return "attn";
    case WeightGroup::kMlp:
      return "mlp";
    case WeightGroup::kLmHead:
      return "lm_head";
  }
  return "?";
}

std::optional<WeightFormat> WeightSpec::Of(WeightGroup g) const {
  switch (g) {
    case WeightGroup::kAttn:
      return attn;
    case WeightGroup::kMlp:
      return mlp;
    case WeightGroup::kLmHead:
      return lm_head;
  }
  return std::nullopt;
}

bool WeightSpec::any_bfp() const {
  for (WeightGroup g : kWeightGroups)
    if (Of(g) && IsBfp(*Of(g))) return true;
  return false;
}

WeightSpec WeightSpec::Parse(const std::string& text) {
  WeightSpec spec;
  const std::vector<std::string> parts = SplitCommas(text);
  if (parts.size() == 1 && parts[0].find('=') == std::string::npos) {
    if (parts[0].empty())
      throw Error(
          Cat("--weights is empty; ", kFormats, ", or GROUP=FORMAT,... (attn, mlp, lm_head)"));
    spec.attn = spec.mlp = spec.lm_head = ParseFormat(text, parts[0]);
    return spec;
  }
  bool named[3] = {false, false, false};
  for (const std::string& part : parts) {
    const size_t eq = part.find('=');
    if (part.empty())
      throw Error(
          Cat("--weights '", text, "': empty part; give GROUP=FORMAT,... (attn, mlp, lm_head)"));
    if (eq == std::string::npos)
      throw Error(Cat("--weights '", text, "': '", part,
                      "' is not GROUP=FORMAT (a single format applies to every group alone)"));
    const std::string group = part.substr(0, eq), format = part.substr(eq + 1);
    int index = -1;
    for (WeightGroup g : kWeightGroups)
      if (group == WeightGroupName(g)) index = static_cast<int>(g);
    if (index < 0)
      throw Error(
          Cat("--weights '", text, "': unknown group '", group, "'; choose attn, mlp or lm_head"));
    if (named[index])
      throw Error(Cat("--weights '", text, "': group '", group, "' is named twice"));
    named[index] = true;
    if (format.empty())
      throw Error(Cat("--weights '", text, "': group '", group, "' has no format; ", kFormats));
    const std::optional<WeightFormat> f = ParseFormat(text, format);
    (index == 0 ? spec.attn : index == 1 ? spec.mlp : spec.lm_head) = f;
  }
  return spec;
}

std::string WeightSpec::ToString() const {
  if (is_auto()) return "auto";
  if (attn && attn == mlp && attn == lm_head) return WeightFormatName(*attn);
  std::string s;
  for (WeightGroup g : kWeightGroups)
    if (Of(g)) s += Cat(s.empty() ? "" : ",", WeightGroupName(g), "=", WeightFormatName(*Of(g)));
  return s;
}

}  // namespace wc
