// A sentencepiece tokenizer.model (tokenizer/tokenizer.h), loaded through a memory file, then used:
// encoding, decoding, every piece's bytes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/sentencepiece_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("tokenizer.model", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  try {
    const wc::SentencePieceTokenizer tok(path);
    const std::vector<int> ids =
        tok.Encode("Hello w\xC3\xB6rld, <0x41> \xF0\x9F\x90\xA6 \xFF end.");
    (void)tok.Decode(ids);
    for (int id = -1; id <= tok.piece_count(); ++id) (void)tok.TokenBytes(id);
    (void)tok.bos_id();
    (void)tok.eos_id();
  } catch (const wc::Error& e) {
    wc::fuzz::CheckError(e, path);
  }
  return 0;
}
