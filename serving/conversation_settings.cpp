// ConversationSettings' own methods (serving/conversation.h), apart from the Conversation: the
// transcript parser (serving/transcript.cpp) checks settings with them, and its fuzzer links
// them without the serving loop.
#include "serving/conversation.h"
#include "util/error.h"

namespace wc {

bool ConversationSettings::operator==(const ConversationSettings& o) const {
  const auto beams_equal = [](const std::optional<BeamParams>& a,
                              const std::optional<BeamParams>& b) {
    if (a.has_value() != b.has_value()) return false;
    return !a || (a->num_beams == b->num_beams && a->length_penalty == b->length_penalty &&
                  a->early_stopping == b->early_stopping && a->num_return == b->num_return);
  };
  return sampling.temperature == o.sampling.temperature && sampling.top_k == o.sampling.top_k &&
         sampling.top_p == o.sampling.top_p && seed == o.seed &&
         max_new_tokens == o.max_new_tokens && beams_equal(beams, o.beams) && system == o.system;
}

void ConversationSettings::Validate() const {
  if (!beams) sampling.Validate();
  if (beams) beams->Validate();
  if (max_new_tokens < 1)  // a reply has a token at least
    throw Error(Cat("max-tokens must be >= 1 in a conversation, got ", max_new_tokens));
}

}  // namespace wc
