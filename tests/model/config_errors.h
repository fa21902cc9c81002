// Shared by the config tests: a config.json that must be refused, and what its one line says.
#pragma once

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "util/error.h"

namespace wc::test {

// ModelConfig::FromJson(j, "cfg.json") throws wc::Error whose message starts with the file's name
// and contains `needle`.
inline void ExpectConfigError(const nlohmann::json& j, const std::string& needle) {
  try {
    ModelConfig::FromJson(j, "cfg.json");
    FAIL() << "accepted: " << j.dump();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("cfg.json: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

}  // namespace wc::test
