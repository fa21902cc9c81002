#include "tokenizer/tokenizer_match.h"

#include <algorithm>
#include <vector>

#include "util/error.h"

namespace wc {
namespace {

// A piece's bytes as a short quoted string for a message: printable ASCII kept, the rest \xNN.
std::string Quoted(std::string_view bytes) {
  std::string out = "\"";
  for (size_t i = 0; i < bytes.size() && i < 24; ++i) {
    const unsigned char ch = static_cast<unsigned char>(bytes[i]);
    if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') {
      out += static_cast<char>(ch);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  if (bytes.size() > 24) out += "...";
  return out + "\"";
}

}  // namespace

const char kTokenizerProbeText[] =
    "Hello, World!  The year 2024: 3.14159 + 42 = 45.14159.\n"
    "\tdef f(x):\n        return x**2  # squared\n"
    "na\xc3\xafve caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x99\x82 "
    "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 -- 'quotes' \"and\" <tags>";

std::string TokenizerDifference(const Tokenizer& a, const Tokenizer& b, const std::string& a_name,
                                const std::string& b_name) {
  if (a.piece_count() != b.piece_count())
    return Cat(a_name, " has ", a.piece_count(), " pieces and ", b_name, " ", b.piece_count());
  for (int id = 0; id < a.piece_count(); ++id) {
    const std::string_view pa = a.TokenBytes(id), pb = b.TokenBytes(id);
    if (pa != pb)
      return Cat("piece ", id, " is ", Quoted(pa), " in ", a_name, " and ", Quoted(pb), " in ",
                 b_name);
  }
  if (a.bos_id() != b.bos_id())
    return Cat("the BOS id is ", a.bos_id(), " in ", a_name, " and ", b.bos_id(), " in ", b_name);
  if (a.eos_id() != b.eos_id())
    return Cat("the EOS id is ", a.eos_id(), " in ", a_name, " and ", b.eos_id(), " in ", b_name);
  // A vocabulary that cannot spell the probe text (a toy's without byte pieces, as the GGUF test
  // fixtures have) refuses it; two that both refuse it are told apart by their pieces alone.
  std::vector<int> ea, eb;
  std::string refused_a, refused_b;
  try {
    ea = a.Encode(kTokenizerProbeText);
  } catch (const Error& e) {
    refused_a = e.what();
  }
  try {
    eb = b.Encode(kTokenizerProbeText);
  } catch (const Error& e) {
    refused_b = e.what();
  }
  if (!refused_a.empty() || !refused_b.empty()) {
    if (!refused_a.empty() && !refused_b.empty()) return "";
    const bool a_refused = !refused_a.empty();
    return Cat(a_refused ? a_name : b_name, " cannot encode a probe text that ",
               a_refused ? b_name : a_name, " encodes (", a_refused ? refused_a : refused_b, ")");
  }
  if (ea != eb) {
    const size_t at = std::mismatch(ea.begin(), ea.end(), eb.begin(), eb.end()).first - ea.begin();
    return Cat("a probe text encodes differently from token ", at, " on (", ea.size(), " vs ",
               eb.size(), " tokens)");
  }
  return "";
}

}  // namespace wc
