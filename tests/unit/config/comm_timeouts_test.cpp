// torchtitan's [comm] timeouts: the keys, their defaults, --set overrides, and the checks.
#include <gtest/gtest.h>

#include <string>

#include "config_testing.h"
#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"

namespace mixprec::config {
namespace {

using testing::load_error;
using testing::load_text;

TEST(ConfigCommTimeouts, TorchtitanDefaults) {
  const TrainConfig c = load_text("");
  EXPECT_EQ(c.comm.init_timeout_seconds, 300);
  EXPECT_EQ(c.comm.train_timeout_seconds, 100);
}

TEST(ConfigCommTimeouts, ReadFromTheFileAndFromOverrides) {
  const TrainConfig file =
      load_text("[comm]\ninit_timeout_seconds = 20\ntrain_timeout_seconds = 5\n");
  EXPECT_EQ(file.comm.init_timeout_seconds, 20);
  EXPECT_EQ(file.comm.train_timeout_seconds, 5);
  const TrainConfig set =
      load_text("[comm]\ntrain_timeout_seconds = 5\n",
                {"comm.train_timeout_seconds=2", "comm.init_timeout_seconds=3"});
  EXPECT_EQ(set.comm.init_timeout_seconds, 3);
  EXPECT_EQ(set.comm.train_timeout_seconds, 2);
}

TEST(ConfigCommTimeouts, MustBePositiveSecondsNamingTheKey) {
  struct Case {
    std::string text;
    std::string expect;
  };
  for (const Case& k : {
           Case{"[comm]\ninit_timeout_seconds = 0\n",
                "line 2: comm.init_timeout_seconds = 0 must be > 0"},
           Case{"[comm]\ntrain_timeout_seconds = -5\n",
                "line 2: comm.train_timeout_seconds = -5 must be > 0"},
           Case{"[comm]\ntrain_timeout_seconds = 2000000000\n",
                "line 2: comm.train_timeout_seconds = 2000000000 must be <= 1000000000"},
           Case{"[comm]\ninit_timeout_seconds = 1.5\n", "comm.init_timeout_seconds"},
           Case{"[comm]\ntrain_timeout = 5\n",
                "unknown key 'comm.train_timeout'; valid keys of [comm]: init_timeout_seconds, "
                "train_timeout_seconds"},
       }) {
    const std::string msg = load_error(k.text);
    EXPECT_NE(msg.find(k.expect), std::string::npos) << k.text << " gave: " << msg;
  }
  const std::string set = load_error("", {"comm.train_timeout_seconds=0"});
  EXPECT_NE(set.find("comm.train_timeout_seconds = 0 must be > 0"), std::string::npos) << set;
}

}  // namespace
}  // namespace mixprec::config
