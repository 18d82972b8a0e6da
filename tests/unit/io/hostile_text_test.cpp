// Untrusted text bounded before parsing: a safetensors header or a TOML config nested tens of
// thousands of levels deep is refused with a message naming the file (it overflowed the stack
// before), a store falls back to the older checkpoint past such a file, and error messages
// quote at most a short prefix of a megabytes-long value.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "io/text_bounds.h"
#include "mixprec/io/checkpoint_store.h"
#include "mixprec/io/config_file.h"
#include "mixprec/io/safetensors.h"
#include "support/op_testing.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

using testing::error_of;

// A safetensors file of one f32 scalar tensor "w" whose header's `key` value is `value`.
std::string safetensors_bytes(const std::string& key, const std::string& value) {
  const auto field = [&](const std::string& k, const std::string& normal) {
    return "\"" + k + "\":" + (k == key ? value : normal);
  };
  const std::string header = "{\"w\":{" + field("dtype", "\"F32\"") + "," + field("shape", "[]") +
                             "," + field("data_offsets", "[0,4]") + "}}";
  std::string bytes(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(bytes.data(), &len, 8);
  return bytes + header + std::string(4, '\0');
}

std::string nested(int depth) {
  return std::string(static_cast<size_t>(depth), '[') + "1" +
         std::string(static_cast<size_t>(depth), ']');
}

TEST(HostileText, JsonDepthIgnoresBracketsInStrings) {
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,[2]],"b":"[[[[\"]]"})"), 3);
  EXPECT_EQ(json_nesting_depth(nested(80000)), 80000);
}

TEST(HostileText, TomlKeyDepthCountsDottedKeysHeadersAndInlineTables) {
  int line = 0;
  EXPECT_EQ(toml_key_depth("[model.moe]\nn_experts = 8\nlr = 1.5e-3\n", &line), 2);
  EXPECT_EQ(line, 1);
  EXPECT_EQ(toml_key_depth("a = 1\nx = {b.c.d = 2}\n", &line), 3);
  EXPECT_EQ(line, 2);
  EXPECT_EQ(toml_key_depth("s = \"a.b.c.d.e\" # x.y.z.w.v\n\"q.r\".t = 1\n", &line), 2);
  EXPECT_EQ(toml_key_depth("m = '''\na.b.c.d.e = 1\n'''\n", &line), 1);
  for (const char* name : {"moe_small", "tiny", "gpt_s"}) {
    const std::string path = std::string(MIXPREC_SOURCE_DIR) + "/configs/" + name + ".toml";
    if (!std::filesystem::exists(path)) continue;
    EXPECT_LE(toml_key_depth(testing::read_file(path), &line), 3) << name;
  }
}

TEST(HostileText, DeeplyNestedSafetensorsHeadersAreRefusedNamingTheFile) {
  testing::TempDir dir;
  for (const char* key : {"shape", "dtype", "data_offsets"}) {
    const std::string path = (dir / (std::string(key) + ".safetensors")).string();
    testing::write_file(path, safetensors_bytes(key, nested(80000)));
    const std::string msg = error_of([&] { load_safetensors(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("80002 levels deep (at most 64)"), std::string::npos) << msg;
    EXPECT_NE(error_of([&] { load_checkpoint(path); }).find("levels deep"), std::string::npos);
  }
}

TEST(HostileText, AStoreFallsBackPastANestedNewestCheckpoint) {
  testing::TempDir dir;
  std::string warnings;
  CheckpointStore store((dir / "ckpt").string(), 0,
                        [&](const std::string& w) { warnings += w + "\n"; });
  store.save(1, {{"w", Tensor::full({}, 1.0)}});
  testing::write_file(dir / "ckpt" / "step-00000002.safetensors",
                      safetensors_bytes("shape", nested(80000)));
  const auto latest = store.load_latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 1);
  EXPECT_NE(warnings.find("levels deep"), std::string::npos) << warnings;
}

TEST(HostileText, MegabyteValuesAreQuotedByAShortPrefix) {
  testing::TempDir dir;
  const std::string huge(10'000'000, 'x');
  const std::string path = (dir / "dtype.safetensors").string();
  testing::write_file(path, safetensors_bytes("dtype", "\"" + huge + "\""));
  const std::string msg = error_of([&] { load_safetensors(path); });
  EXPECT_NE(msg.find("more bytes"), std::string::npos) << msg.substr(0, 300);
  EXPECT_LT(msg.size(), 400u);

  const std::string long_text(500'000, 'x');  // a config may be 1 MiB
  const std::string value = error_of([&] {
    config::load_config_text("[training]\nprecision = \"" + long_text + "\"\n", "c.toml");
  });
  EXPECT_NE(value.find("more bytes"), std::string::npos) << value.substr(0, 300);
  EXPECT_LT(value.size(), 1000u);
  const std::string key =
      error_of([&] { config::load_config_text("[training]\n" + long_text + " = 1\n", "c.toml"); });
  EXPECT_NE(key.find("more bytes"), std::string::npos) << key.substr(0, 300);
  EXPECT_LT(key.size(), 1000u);
}

TEST(HostileText, DeeplyNestedConfigKeysAreRefusedNamingTheFileAndLine) {
  std::string dotted = "a";
  for (int i = 0; i < 50000; ++i) dotted += ".a";
  const std::string key = error_of([&] { config::load_config_text(dotted + " = 1\n", "k.toml"); });
  EXPECT_NE(key.find("config k.toml"), std::string::npos) << key.substr(0, 200);
  EXPECT_NE(key.find("line 1"), std::string::npos) << key.substr(0, 200);
  EXPECT_NE(key.find("50001 dotted parts"), std::string::npos) << key.substr(0, 200);
  const std::string header =
      error_of([&] { config::load_config_text("x = 1\n[" + dotted + "]\n", "h.toml"); });
  EXPECT_NE(header.find("line 2"), std::string::npos) << header.substr(0, 200);
  EXPECT_NE(error_of([&] {
              config::load_config_text(std::string(2 << 20, '#'), "big.toml");
            }).find("bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec::io

namespace mixprec::io {
namespace {

// Found by fuzzing: an override with invalid UTF-8 was accepted, and the config it made could
// not be written back (a checkpoint's stored config would not load).
TEST(HostileText, AnOverrideThatIsNotUtf8IsRefused) {
  try {
    config::load_config_text("", "cfg.toml", {"run_dir=\"uu\xc6\xc6uu\""});
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cfg.toml"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec::io
