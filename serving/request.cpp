#include "serving/request.h"

namespace wc {

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kEos:
      return "eos";
    case StopReason::kStopString:
      return "stop";
    case StopReason::kMaxTokens:
      return "length";
    case StopReason::kContextFull:
      return "context";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kError:
      return "error";
  }
  return "?";
}

const char* FinishReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kEos:
    case StopReason::kStopString:
      return "stop";
    case StopReason::kMaxTokens:
    case StopReason::kContextFull:
      return "length";
    default:
      return nullptr;
  }
}

}  // namespace wc
