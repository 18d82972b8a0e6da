// End-to-end tests of `mixprec dtype info` and `mixprec dtype cast`: the built binary is run
// as a child process (path in MIXPREC_CLI, set by CTest) and its stdout, stderr and exit
// status are checked. Every expected constant and bit pattern below is derived by hand from
// IEEE 754 / the OCP FP8 spec (derivations in the comments), never copied from the program.
#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_running.h"

namespace {

using mixprec::testing::describe;
using mixprec::testing::run_cli;
using mixprec::testing::RunResult;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

double to_double(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && !s.empty() ? v : std::nan("");
}

// ---------------------------------------------------------------------------------------------
// `dtype cast` output: a "rounding ..." line, then per value a line "<input>  = <value> (f64
// 0x...)", a "target bits value rel.error" header and one row per target.

struct CastRow {
  std::string bits, value, rel_error;
};

struct CastBlock {
  std::string input;                    // the value as the user typed it
  std::vector<std::string> targets;     // row labels, in output order
  std::map<std::string, CastRow> rows;  // by label
  std::string bits(const std::string& target) const {
    const auto it = rows.find(target);
    return it == rows.end() ? "<no row for " + target + ">" : it->second.bits;
  }
};

struct CastOutput {
  std::string rounding_line;
  std::vector<CastBlock> blocks;
};

CastOutput parse_cast(const std::string& text) {
  CastOutput o;
  for (const std::string& line : lines_of(text)) {
    if (line.empty()) continue;
    if (line.rfind("rounding ", 0) == 0) {
      o.rounding_line = line;
    } else if (line[0] != ' ' && line.find("  = ") != std::string::npos) {
      o.blocks.push_back({line.substr(0, line.find("  = ")), {}, {}});
    } else if (line.rfind("  ", 0) == 0 && !o.blocks.empty()) {
      const std::vector<std::string> w = words_of(line);
      if (w.size() != 4 || w[0] == "target") continue;
      o.blocks.back().targets.push_back(w[0]);
      o.blocks.back().rows[w[0]] = {w[1], w[2], w[3]};
    }
  }
  return o;
}

// Runs `mixprec dtype cast args...`, expecting success; parses stdout.
CastOutput cast_ok(const std::vector<std::string>& args, std::string* raw_out = nullptr) {
  std::vector<std::string> full{"dtype", "cast"};
  full.insert(full.end(), args.begin(), args.end());
  const RunResult r = run_cli(full);
  EXPECT_EQ(r.exit_code, 0) << describe(full, r);
  EXPECT_EQ(r.err, "") << describe(full, r);
  if (raw_out) *raw_out = r.out;
  return parse_cast(r.out);
}

// The single block of a one-value cast (an empty block, and a test failure, otherwise).
CastBlock cast_one(const std::vector<std::string>& args) {
  const CastOutput o = cast_ok(args);
  if (o.blocks.size() != 1) {
    ADD_FAILURE() << "expected one value block, got " << o.blocks.size();
    return {};
  }
  return o.blocks[0];
}

// Bad input: exit status 2, nothing on stdout, exactly one line on stderr naming `token`.
void expect_usage_error(const std::vector<std::string>& args, const std::string& token) {
  const RunResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << describe(args, r);
  EXPECT_EQ(r.out, "") << describe(args, r);
  ASSERT_FALSE(r.err.empty()) << describe(args, r);
  EXPECT_EQ(r.err.back(), '\n') << describe(args, r);
  EXPECT_EQ(lines_of(r.err).size(), 1u) << describe(args, r);
  EXPECT_NE(r.err.find(token), std::string::npos) << "stderr does not name '" << token << "'\n"
                                                  << describe(args, r);
}

// ---------------------------------------------------------------------------------------------
// `dtype info`

// Columns: format bits s/e/m bias max-finite | min normal as 2^k, decimal | min subnormal as
// 2^k, decimal | epsilon as 2^k, decimal | digits | inf | NaN encodings...
enum InfoColumn {
  kName,
  kBits,
  kLayout,
  kBias,
  kMax,
  kMinNormalPow,
  kMinNormal,
  kMinSubPow,
  kMinSub,
  kEpsPow,
  kEps,
  kDigits,
  kInf,
  kNan
};

struct ExpectedFormat {
  const char* row_name;
  const char* bits;
  const char* layout;
  const char* bias;
  double max_finite;      // exact value
  const char* max_text;   // how a %.8g-style column must read it
  int min_normal_exp;     // 1 - bias
  int min_subnormal_exp;  // 1 - bias - mantissa bits
  int epsilon_exp;        // -mantissa bits
  const char* digits;     // (mantissa bits + 1) * log10(2), 2 decimals
  const char* inf;
};

// Hand-derived from IEEE 754 (f64, f32, f16), the bfloat16 definition (f32 with 7 stored
// mantissa bits), NVIDIA TF32 (f32 range, 10 mantissa bits) and OCP FP8 (E4M3FN: bias 7, no
// inf, S.1111.111 is the only NaN, so max = 1.110b * 2^8 = 448; E5M2: IEEE-like, bias 15, max =
// 1.11b * 2^15 = 57344).
//   f64  max (2 - 2^-52) * 2^1023 = 1.7976931348623157e308
//   f32  max (2 - 2^-23) * 2^127  = 3.4028234664e38
//   tf32 max (2 - 2^-10) * 2^127  = 2^128 - 2^117 = 3.40116213e38
//   bf16 max (2 - 2^-7)  * 2^127  = 2^128 - 2^120 = 3.38953139e38
//   f16  max (2 - 2^-10) * 2^15   = 65504
// digits: 53*0.30103=15.95, 24*..=7.22, 11*..=3.31, 8*..=2.41, 4*..=1.20, 3*..=0.90.
// The OCP MX formats (MX v1.0 spec) that are not tensor dtypes:
//   E2M1: S.EE.M, bias 1, no inf or NaN: max 1.1b * 2^(3-1) = 6, min normal 2^(1-1) = 1,
//         subnormal 0.1b * 2^0 = 2^-1, epsilon 2^-1, digits 2*0.30103 = 0.60.
//   E8M0: EEEEEEEE, no sign and no mantissa, bias 127, 0xFF NaN, field 0 is 2^-127 (no zero or
//         subnormal): max 2^(254-127) = 2^127 = 1.7014118e38, min 2^-127, epsilon 2^0,
//         digits 1*0.30103 = 0.30.
const ExpectedFormat kExpectedFormats[] = {
    {"f64", "64", "1/11/52", "1023", std::ldexp(2.0 - std::ldexp(1.0, -52), 1023), "1.7976931e+308",
     -1022, -1074, -52, "15.95", "yes"},
    {"f32", "32", "1/8/23", "127", std::ldexp(2.0 - std::ldexp(1.0, -23), 127), "3.4028235e+38",
     -126, -149, -23, "7.22", "yes"},
    {"tf32*", "19", "1/8/10", "127", std::ldexp(2.0 - std::ldexp(1.0, -10), 127), "3.4011621e+38",
     -126, -136, -10, "3.31", "yes"},
    {"bf16", "16", "1/8/7", "127", std::ldexp(2.0 - std::ldexp(1.0, -7), 127), "3.3895314e+38",
     -126, -133, -7, "2.41", "yes"},
    {"f16", "16", "1/5/10", "15", 65504.0, "65504", -14, -24, -10, "3.31", "yes"},
    {"f8_e4m3fn", "8", "1/4/3", "7", 448.0, "448", -6, -9, -3, "1.20", "no"},
    {"f8_e5m2", "8", "1/5/2", "15", 57344.0, "57344", -14, -16, -2, "0.90", "yes"},
    {"f4_e2m1fn", "4", "1/2/1", "1", 6.0, "6", 0, -1, -1, "0.60", "no"},
    {"f8_e8m0fnu*", "8", "0/8/0", "127", std::ldexp(1.0, 127), "1.7014118e+38", -127, -127, 0,
     "0.30", "no"},
};

const std::set<std::string> kAllRowNames{"f64",       "f32",     "tf32*",     "bf16",        "f16",
                                         "f8_e4m3fn", "f8_e5m2", "f4_e2m1fn", "f8_e8m0fnu*", "i32",
                                         "i64",       "u8",      "bool"};

// Rows of a `dtype info` output, keyed by their first word (only known format names).
std::map<std::string, std::vector<std::string>> info_rows(const std::string& out) {
  std::map<std::string, std::vector<std::string>> rows;
  for (const std::string& line : lines_of(out)) {
    const std::vector<std::string> w = words_of(line);
    if (!w.empty() && kAllRowNames.count(w[0])) {
      EXPECT_EQ(rows.count(w[0]), 0u) << "duplicate row " << w[0];
      rows[w[0]] = w;
    }
  }
  return rows;
}

void expect_format_row(const std::vector<std::string>& w, const ExpectedFormat& e) {
  SCOPED_TRACE(e.row_name);
  ASSERT_GT(w.size(), static_cast<std::size_t>(kNan));
  EXPECT_EQ(w[kBits], e.bits);
  EXPECT_EQ(w[kLayout], e.layout);
  EXPECT_EQ(w[kBias], e.bias);
  EXPECT_EQ(w[kMax], e.max_text);
  EXPECT_NEAR(to_double(w[kMax]) / e.max_finite, 1.0, 1e-7);
  EXPECT_EQ(w[kMinNormalPow], "2^" + std::to_string(e.min_normal_exp));
  EXPECT_NEAR(to_double(w[kMinNormal]) / std::ldexp(1.0, e.min_normal_exp), 1.0, 1e-3);
  EXPECT_EQ(w[kMinSubPow], "2^" + std::to_string(e.min_subnormal_exp));
  // 2^-1074 = 4.94e-324 is itself subnormal in f64, so parse it with a wider tolerance.
  EXPECT_NEAR(to_double(w[kMinSub]) / std::ldexp(1.0, e.min_subnormal_exp), 1.0, 2e-3);
  EXPECT_EQ(w[kEpsPow], "2^" + std::to_string(e.epsilon_exp));
  // Printed to 3 significant digits (1.19e-07 for 2^-23 = 1.1920929e-07).
  EXPECT_NEAR(to_double(w[kEps]) / std::ldexp(1.0, e.epsilon_exp), 1.0, 5e-3);
  EXPECT_EQ(w[kDigits], e.digits);
  EXPECT_EQ(w[kInf], e.inf);
}

TEST(DtypeInfo, FullTableHasEveryFloatingFormatWithItsConstants) {
  const std::vector<std::string> args{"dtype", "info"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  EXPECT_EQ(r.err, "");
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_FALSE(lines.empty());
  // Header: the columns the row checks below index, in this order.
  std::size_t at = 0;
  for (const char* col : {"format", "bits", "s/e/m", "bias", "max finite", "min normal",
                          "min subnormal", "epsilon", "digits", "inf", "NaN"}) {
    const std::size_t p = lines[0].find(col, at);
    ASSERT_NE(p, std::string::npos) << "header lacks '" << col << "' in order: " << lines[0];
    at = p + 1;
  }
  const auto rows = info_rows(r.out);
  EXPECT_EQ(rows.size(), std::size(kExpectedFormats)) << r.out;  // no integer rows by default
  for (const ExpectedFormat& e : kExpectedFormats) {
    ASSERT_TRUE(rows.count(e.row_name)) << "no row for " << e.row_name << "\n" << r.out;
    expect_format_row(rows.at(e.row_name), e);
  }
  // E4M3FN has exactly two NaN encodings, S.1111.111: 0x7F and 0xFF.
  const std::vector<std::string>& e4m3 = rows.at("f8_e4m3fn");
  std::string nan_text;
  for (std::size_t i = kNan; i < e4m3.size(); ++i) nan_text += e4m3[i] + " ";
  EXPECT_NE(nan_text.find("0x7F"), std::string::npos) << nan_text;
  EXPECT_NE(nan_text.find("0xFF"), std::string::npos) << nan_text;
  // tf32 is marked and explained as not being a storage type.
  EXPECT_NE(r.out.find("* tf32"), std::string::npos) << r.out;
}

TEST(DtypeInfo, NamedFormatsShowOnlyThoseRows) {
  const std::vector<std::string> args{"dtype", "info", "bf16", "i64"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  EXPECT_EQ(r.err, "");
  const auto rows = info_rows(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  ASSERT_TRUE(rows.count("bf16")) << r.out;
  ASSERT_TRUE(rows.count("i64")) << r.out;
  expect_format_row(rows.at("bf16"), kExpectedFormats[3]);
  // i64: -2^63 .. 2^63 - 1, 8 bytes.
  EXPECT_EQ(rows.at("i64"),
            (std::vector<std::string>{"i64", "8", "-9223372036854775808", "9223372036854775807"}));
  EXPECT_EQ(r.out.find("tf32"), std::string::npos) << "tf32 footnote without a tf32 row";
}

TEST(DtypeInfo, AliasesSelectTheCanonicalRows) {
  const std::vector<std::string> args{"dtype", "info", "e4m3", "half", "tf32"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  const auto rows = info_rows(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  ASSERT_TRUE(rows.count("f8_e4m3fn") && rows.count("f16") && rows.count("tf32*")) << r.out;
  expect_format_row(rows.at("f8_e4m3fn"), kExpectedFormats[5]);
  expect_format_row(rows.at("f16"), kExpectedFormats[4]);
  expect_format_row(rows.at("tf32*"), kExpectedFormats[2]);
}

TEST(DtypeInfo, UnknownNameIsAUsageError) {
  expect_usage_error({"dtype", "info", "bf17"}, "'bf17'");
  // Nothing is printed for the valid names before the bad one.
  expect_usage_error({"dtype", "info", "bf16", "f9"}, "'f9'");
}

// The MX formats are rows under their peers' spellings (E8M0 marked as not being a dtype; E2M1
// is the storage dtype f4_e2m1fn), and their NaN columns say what the formats hold: E2M1 none,
// E8M0 the one unsigned pattern 0xFF.
TEST(DtypeInfo, MxElementAndScaleFormatsHaveRows) {
  const std::vector<std::string> args{"dtype", "info", "float4_e2m1fn", "ue8m0"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  const auto rows = info_rows(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  ASSERT_TRUE(rows.count("f4_e2m1fn") && rows.count("f8_e8m0fnu*")) << r.out;
  expect_format_row(rows.at("f4_e2m1fn"), kExpectedFormats[7]);
  expect_format_row(rows.at("f8_e8m0fnu*"), kExpectedFormats[8]);
  EXPECT_EQ(rows.at("f4_e2m1fn").back(), "none") << r.out;
  EXPECT_EQ(rows.at("f8_e8m0fnu*")[kNan], "0xFF") << r.out;
  EXPECT_NE(r.out.find("not a tensor dtype"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("* tf32"), std::string::npos) << r.out;
}

// The fp8 NaN rule (encode.h, and what cast does, see NanPayloads below) gives every fp8 NaN
// the canonical all-ones pattern with no payload; the table should not say otherwise.
TEST(DtypeInfo, E5m2NanColumnDoesNotPromiseAPayload) {
  const std::vector<std::string> args{"dtype", "info", "e5m2"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  EXPECT_EQ(r.out.find("payload"), std::string::npos) << r.out;
}

// ---------------------------------------------------------------------------------------------
// `dtype cast`: round to nearest even

TEST(DtypeCast, PointOneInEveryTarget) {
  // 0.1 = 1.6 * 2^-4; 1.6 = 1.1001 1001 1001 1001 ... (binary, period 1001 after the point).
  //  bf16: exp 127-4 = 123 = 0111 1011; 7 bits 1001100|11.. > half -> 1001101
  //        0 01111011 1001101 = 0x3DCD; value 205/2048 = 0.10009765625.
  //  f16:  exp 15-4 = 11 = 01011; 10 bits 1001100110|0110.. < half -> 1001100110
  //        0 01011 1001100110 = 0x2E66; value 1638/16384 = 0.0999755859375.
  //  e4m3: exp 7-4 = 3 = 0011; 3 bits 100|11.. > half -> 101: 0 0011 101 = 0x1D.
  //  e5m2: exp 11 = 01011; 2 bits 10|0110.. < half -> 10: 0 01011 10 = 0x2E.
  //  tf32: exp 123, 10 bits as f16 -> f32 word 0 01111011 1001100110 0{13} = 0x3DCCC000.
  //  f32:  23 bits 1001 1001 1001 1001 1001 100|1100.. > half -> ...101 = 0x3DCCCCCD.
  const CastBlock b = cast_one({"0.1", "--to", "bf16,f16,e4m3,e5m2,tf32,f32"});
  EXPECT_EQ(b.input, "0.1");
  EXPECT_EQ(b.targets,
            (std::vector<std::string>{"bf16", "f16", "f8_e4m3fn", "f8_e5m2", "tf32", "f32"}));
  EXPECT_EQ(b.bits("bf16"), "0x3DCD");
  EXPECT_EQ(b.bits("f16"), "0x2E66");
  EXPECT_EQ(b.bits("f8_e4m3fn"), "0x1D");
  EXPECT_EQ(b.bits("f8_e5m2"), "0x2E");
  EXPECT_EQ(b.bits("tf32"), "0x3DCCC000");
  EXPECT_EQ(b.bits("f32"), "0x3DCCCCCD");
  ASSERT_TRUE(b.rows.count("bf16") && b.rows.count("f16"));
  EXPECT_NEAR(to_double(b.rows.at("bf16").value), 0.10009765625, 1e-9);
  EXPECT_NEAR(to_double(b.rows.at("f16").value), 0.0999755859375, 1e-9);
  // rel.error of bf16: (0.10009765625 - 0.1) / 0.1 = +9.765625e-4.
  EXPECT_NEAR(to_double(b.rows.at("bf16").rel_error), 9.765625e-4, 1e-6);
}

TEST(DtypeCast, DefaultTargetsAreBf16F16E4m3E5m2Tf32) {
  const CastOutput o = cast_ok({"0.1"});
  EXPECT_EQ(o.rounding_line, "rounding rne");
  ASSERT_EQ(o.blocks.size(), 1u);
  EXPECT_EQ(o.blocks[0].targets,
            (std::vector<std::string>{"bf16", "f16", "f8_e4m3fn", "f8_e5m2", "tf32"}));
  EXPECT_EQ(o.blocks[0].bits("bf16"), "0x3DCD");
  EXPECT_EQ(o.blocks[0].bits("tf32"), "0x3DCCC000");  // tf32 shown as its f32 word
}

TEST(DtypeCast, F16OverflowBoundary) {
  // f16 max 65504 = 1.1111111111b * 2^15 = 0 11110 1111111111 = 0x7BFF; one ulp there is 32,
  // so the next step up, 65536, is past max: inf 0 11111 0000000000 = 0x7C00. Midpoint 65520.
  const CastOutput o =
      cast_ok({"65504", "65519.996", "65520", "65536", "--to", "f16"});  // one value per block
  ASSERT_EQ(o.blocks.size(), 4u);
  EXPECT_EQ(o.blocks[0].bits("f16"), "0x7BFF");  // exact
  EXPECT_EQ(o.blocks[1].bits("f16"), "0x7BFF");  // below the midpoint: down
  EXPECT_EQ(o.blocks[2].bits("f16"), "0x7C00");  // tie, 0x7BFF is odd: up, i.e. overflow
  EXPECT_EQ(o.blocks[3].bits("f16"), "0x7C00");
  ASSERT_TRUE(o.blocks[2].rows.count("f16"));
  EXPECT_EQ(o.blocks[2].rows.at("f16").value, "inf");
  EXPECT_EQ(o.blocks[2].rows.at("f16").rel_error, "overflow");
}

TEST(DtypeCast, Bf16TiesFromRawF32Bits) {
  // f32 -> bf16 keeps the top 16 bits; the low 16 are discarded (half = 0x8000).
  //  0x7F7F8000: keep 0x7F7F (= bf16 max, odd), tie -> up -> 0x7F80 = inf.
  //  0x7F7F7FFF: below half -> 0x7F7F.
  //  0x3F808000: 1 + 2^-8, keep 0x3F80 (even), tie -> stays 0x3F80.
  //  0x3F818000: keep 0x3F81 (odd), tie -> 0x3F82.
  const CastOutput o = cast_ok(
      {"bits:0x7F7F8000", "bits:0x7F7F7FFF", "bits:0x3F808000", "bits:0x3F818000", "--to", "bf16"});
  ASSERT_EQ(o.blocks.size(), 4u);
  EXPECT_EQ(o.blocks[0].input, "bits:0x7F7F8000");
  EXPECT_EQ(o.blocks[0].bits("bf16"), "0x7F80");
  EXPECT_EQ(o.blocks[1].bits("bf16"), "0x7F7F");
  EXPECT_EQ(o.blocks[2].bits("bf16"), "0x3F80");
  EXPECT_EQ(o.blocks[3].bits("bf16"), "0x3F82");
}

TEST(DtypeCast, E4m3OverflowIsNanUnlessSaturating) {
  // e4m3fn: max 448 = 1.110b * 2^8 = 0 1111 110 = 0x7E; 0 1111 111 = 0x7F is NaN (no inf).
  // 464 = 1.1101b * 2^8: mantissa 110|1 is a tie between 448 (110, even) and 480 -> 0x7E.
  // 470 > 464: rounds to 480, which does not exist -> overflow -> NaN 0x7F (sign kept: 0xFF).
  // --saturate: overflow -> max finite 0x7E / 0xFE.
  const CastOutput o = cast_ok({"448", "464", "470", "-470", "--to", "e4m3"});
  ASSERT_EQ(o.blocks.size(), 4u);
  EXPECT_EQ(o.blocks[0].bits("f8_e4m3fn"), "0x7E");
  EXPECT_EQ(o.blocks[1].bits("f8_e4m3fn"), "0x7E");
  EXPECT_EQ(o.blocks[2].bits("f8_e4m3fn"), "0x7F");
  EXPECT_EQ(o.blocks[3].bits("f8_e4m3fn"), "0xFF");
  ASSERT_TRUE(o.blocks[2].rows.count("f8_e4m3fn"));
  EXPECT_EQ(o.blocks[2].rows.at("f8_e4m3fn").value, "nan");

  const CastOutput s = cast_ok({"470", "-470", "inf", "--to", "e4m3", "--saturate"});
  EXPECT_EQ(s.rounding_line, "rounding rne, saturating");
  ASSERT_EQ(s.blocks.size(), 3u);
  EXPECT_EQ(s.blocks[0].bits("f8_e4m3fn"), "0x7E");
  EXPECT_EQ(s.blocks[1].bits("f8_e4m3fn"), "0xFE");
  EXPECT_EQ(s.blocks[2].bits("f8_e4m3fn"), "0x7E");  // --saturate maps inf to max finite too
}

TEST(DtypeCast, E5m2OverflowIsInf) {
  // e5m2: max 57344 = 1.11b * 2^15 = 0 11110 11 = 0x7B; inf 0 11111 00 = 0x7C. Ulp at the top
  // is 8192, midpoint 61440: tie with 0x7B odd -> up -> inf. 61439 -> 0x7B.
  const CastOutput o = cast_ok({"57344", "61439", "61440", "--to", "e5m2"});
  ASSERT_EQ(o.blocks.size(), 3u);
  EXPECT_EQ(o.blocks[0].bits("f8_e5m2"), "0x7B");
  EXPECT_EQ(o.blocks[1].bits("f8_e5m2"), "0x7B");
  EXPECT_EQ(o.blocks[2].bits("f8_e5m2"), "0x7C");
  const CastBlock s = cast_one({"61440", "--to", "e5m2", "--saturate"});
  EXPECT_EQ(s.bits("f8_e5m2"), "0x7B");
}

TEST(DtypeCast, NegativeSpecialsArePositionalValues) {
  // -inf: bf16 1 11111111 0000000 = 0xFF80; f16 1 11111 0{10} = 0xFC00; e5m2 1 11111 00 =
  // 0xFC; e4m3fn has no inf, so -inf -> NaN with sign 0xFF; tf32 f32 word 0xFF800000.
  const std::vector<std::string> all{"--to", "bf16,f16,e4m3,e5m2,tf32"};
  for (const char* spelling : {"-inf", "-Inf", "-INFINITY"}) {
    SCOPED_TRACE(spelling);
    std::vector<std::string> args{spelling};
    args.insert(args.end(), all.begin(), all.end());
    const CastBlock b = cast_one(args);
    EXPECT_EQ(b.input, spelling);
    EXPECT_EQ(b.bits("bf16"), "0xFF80");
    EXPECT_EQ(b.bits("f16"), "0xFC00");
    EXPECT_EQ(b.bits("f8_e5m2"), "0xFC");
    EXPECT_EQ(b.bits("f8_e4m3fn"), "0xFF");
    EXPECT_EQ(b.bits("tf32"), "0xFF800000");
  }
  // After an option, and mixed with other values; +inf for contrast (0x7F80).
  const CastOutput o = cast_ok({"--to", "bf16", "-inf", "inf", "-0.5"});
  ASSERT_EQ(o.blocks.size(), 3u);
  EXPECT_EQ(o.blocks[0].bits("bf16"), "0xFF80");
  EXPECT_EQ(o.blocks[1].bits("bf16"), "0x7F80");
  EXPECT_EQ(o.blocks[2].bits("bf16"), "0xBF00");  // -0.5 = 1 01111110 0000000
  // -nan keeps its sign: bf16 quiet NaN 0x7FC0 | sign = 0xFFC0; f16 0x7E00 | 0x8000 = 0xFE00.
  const CastBlock n = cast_one({"-nan", "--to", "bf16,f16"});
  EXPECT_EQ(n.bits("bf16"), "0xFFC0");
  EXPECT_EQ(n.bits("f16"), "0xFE00");
  // -0 keeps its sign: bf16 0x8000, e4m3 0x80.
  const CastBlock z = cast_one({"-0", "--to", "bf16,e4m3"});
  EXPECT_EQ(z.bits("bf16"), "0x8000");
  EXPECT_EQ(z.bits("f8_e4m3fn"), "0x80");
}

TEST(DtypeCast, NegativeDecimalWithoutLeadingDigit) {
  // -0.5 = -1.0b * 2^-1: 1 01111110 0000000 = 0xBF00.
  const CastBlock b = cast_one({"-.5", "--to", "bf16"});
  EXPECT_EQ(b.bits("bf16"), "0xBF00");
}

TEST(DtypeCast, HexFloatIsExactEverywhere) {
  // 0x1.8p-3 = 1.1b * 2^-3 = 0.1875: one mantissa bit, fits every format.
  //  bf16 0 01111100 1000000 = 0x3E40;  f16 0 01100 1000000000 = 0x3200;
  //  e4m3 0 0100 100 = 0x24;            e5m2 0 01100 10 = 0x32;
  //  tf32 / f32 0 01111100 1{0x22} = 0x3E400000.
  const CastBlock b = cast_one({"0x1.8p-3", "--to", "bf16,f16,e4m3,e5m2,tf32,f32"});
  EXPECT_EQ(b.bits("bf16"), "0x3E40");
  EXPECT_EQ(b.bits("f16"), "0x3200");
  EXPECT_EQ(b.bits("f8_e4m3fn"), "0x24");
  EXPECT_EQ(b.bits("f8_e5m2"), "0x32");
  EXPECT_EQ(b.bits("tf32"), "0x3E400000");
  EXPECT_EQ(b.bits("f32"), "0x3E400000");
  for (const auto& [target, row] : b.rows) {
    SCOPED_TRACE(target);
    EXPECT_EQ(to_double(row.value), 0.1875);
    EXPECT_EQ(row.rel_error, "exact");
  }
  // Exact under every rounding mode and seed, too.
  for (const char* seed : {"1", "2", "3"}) {
    const CastBlock s =
        cast_one({"0x1.8p-3", "--to", "bf16,e4m3", "--rounding", "stochastic", "--seed", seed});
    EXPECT_EQ(s.bits("bf16"), "0x3E40");
    EXPECT_EQ(s.bits("f8_e4m3fn"), "0x24");
  }
}

TEST(DtypeCast, Tf32IsShownAsAnF32Word) {
  // tf32 keeps 10 of f32's 23 mantissa bits; the 13 low bits of the shown word are zero.
  //  0x1.002p0 = 1 + 2^-11: tie, 0000000000 even -> 1.0 = 0x3F800000.
  //  0x1.006p0 = 1 + 3*2^-11: mantissa 0000000001|1, tie, odd -> 0000000010 -> 0x3F804000.
  const CastOutput o = cast_ok({"0x1.002p0", "0x1.006p0", "bits:0x3DCCCCCD", "--to", "tf32"});
  ASSERT_EQ(o.blocks.size(), 3u);
  EXPECT_EQ(o.blocks[0].bits("tf32"), "0x3F800000");
  EXPECT_EQ(o.blocks[1].bits("tf32"), "0x3F804000");
  // f32 0.1 = 0x3DCCCCCD: low 13 bits 0x0CCD < 0x1000 -> down -> 0x3DCCC000.
  EXPECT_EQ(o.blocks[2].bits("tf32"), "0x3DCCC000");
}

TEST(DtypeCast, SmallestSubnormals) {
  // f16 min subnormal 2^-24 = 0x0001; 2^-25 is the tie between 0 and 2^-24 -> even 0x0000;
  // 1.5 * 2^-25 is above it -> 0x0001. e4m3 2^-9 -> 0x01; e5m2 2^-16 -> 0x01; bf16 2^-133 ->
  // 0x0001.
  const CastOutput o = cast_ok({"0x1p-24", "0x1p-25", "0x1.8p-25", "--to", "f16"});
  ASSERT_EQ(o.blocks.size(), 3u);
  EXPECT_EQ(o.blocks[0].bits("f16"), "0x0001");
  EXPECT_EQ(o.blocks[1].bits("f16"), "0x0000");
  EXPECT_EQ(o.blocks[2].bits("f16"), "0x0001");
  EXPECT_EQ(cast_one({"0x1p-9", "--to", "e4m3"}).bits("f8_e4m3fn"), "0x01");
  EXPECT_EQ(cast_one({"0x1p-16", "--to", "e5m2"}).bits("f8_e5m2"), "0x01");
  EXPECT_EQ(cast_one({"0x1p-133", "--to", "bf16"}).bits("bf16"), "0x0001");
}

TEST(DtypeCast, NanPayloads) {
  // f32 0x7FA00000: signalling NaN, payload bit 21. IEEE formats keep sign and top payload
  // bits and set the quiet bit: bf16 0x7FC0 | (0x200000 >> 16 = 0x20) = 0x7FE0; f16 0x7E00 |
  // (0x200000 >> 13 = 0x100) = 0x7F00; tf32/f32 0x7FC00000 | 0x200000 = 0x7FE00000. fp8: the
  // canonical all-ones 0x7F.
  const CastBlock b = cast_one({"bits:0x7FA00000", "--to", "bf16,f16,e4m3,e5m2,tf32,f32"});
  EXPECT_EQ(b.bits("bf16"), "0x7FE0");
  EXPECT_EQ(b.bits("f16"), "0x7F00");
  EXPECT_EQ(b.bits("f8_e4m3fn"), "0x7F");
  EXPECT_EQ(b.bits("f8_e5m2"), "0x7F");
  EXPECT_EQ(b.bits("tf32"), "0x7FE00000");
  EXPECT_EQ(b.bits("f32"), "0x7FE00000");
}

TEST(DtypeCast, TargetAliases) {
  const CastBlock b = cast_one({"1", "--to", "bfloat16,half,fp8_e4m3,float8_e5m2"});
  EXPECT_EQ(b.targets, (std::vector<std::string>{"bf16", "f16", "f8_e4m3fn", "f8_e5m2"}));
  // 1.0: bf16 0 01111111 0000000 = 0x3F80; f16 0 01111 0{10} = 0x3C00; e4m3 0 0111 000 =
  // 0x38; e5m2 0 01111 00 = 0x3C.
  EXPECT_EQ(b.bits("bf16"), "0x3F80");
  EXPECT_EQ(b.bits("f16"), "0x3C00");
  EXPECT_EQ(b.bits("f8_e4m3fn"), "0x38");
  EXPECT_EQ(b.bits("f8_e5m2"), "0x3C");
}

// E2M1 (+-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, S.EE.M): 2.5 is a tie between 2 (0 10 0 = 0x4) and 3
// (0 10 1 = 0x5) and goes to the even mantissa, 2; 0.25 ties between 0 and 0.5 -> 0; 1e9
// has no inf to go to and saturates to 6 (0 11 1 = 0x7); -0.8 -> -1 (1 01 0 = 0xA).
TEST(DtypeCast, E2m1RoundsTiesToEvenAndSaturates) {
  const CastOutput o = cast_ok({"2.5", "0.25", "1e9", "-0.8", "--to", "e2m1"});
  ASSERT_EQ(o.blocks.size(), 4u);
  EXPECT_EQ(o.blocks[0].targets, (std::vector<std::string>{"f4_e2m1fn"}));
  EXPECT_EQ(o.blocks[0].bits("f4_e2m1fn"), "0x04");
  EXPECT_EQ(o.blocks[1].bits("f4_e2m1fn"), "0x00");
  EXPECT_EQ(o.blocks[2].bits("f4_e2m1fn"), "0x07");
  EXPECT_EQ(o.blocks[3].bits("f4_e2m1fn"), "0x0A");
  EXPECT_EQ(o.blocks[3].rows.at("f4_e2m1fn").value, "-1");
}

// ---------------------------------------------------------------------------------------------
// `dtype cast --rounding rtz | stochastic`

TEST(DtypeCast, RoundTowardZero) {
  // Truncate the discarded bits (see PointOneInEveryTarget for the bit strings of 0.1):
  //  bf16 1001100 -> 0x3DCC (-0.1: 0xBDCC); f16 0x2E66 (already down); e4m3 100 -> 0 0011 100 =
  //  0x1C; e5m2 0x2E; tf32 0x3DCCC000.
  // Overflow toward zero gives max finite: 65520 -> f16 0x7BFF, 1e6 -> e4m3 0x7E.
  const CastOutput o = cast_ok(
      {"0.1", "-0.1", "65520", "1e6", "--rounding", "rtz", "--to", "bf16,f16,e4m3,e5m2,tf32"});
  EXPECT_EQ(o.rounding_line, "rounding rtz");
  ASSERT_EQ(o.blocks.size(), 4u);
  EXPECT_EQ(o.blocks[0].bits("bf16"), "0x3DCC");
  EXPECT_EQ(o.blocks[0].bits("f16"), "0x2E66");
  EXPECT_EQ(o.blocks[0].bits("f8_e4m3fn"), "0x1C");
  EXPECT_EQ(o.blocks[0].bits("f8_e5m2"), "0x2E");
  EXPECT_EQ(o.blocks[0].bits("tf32"), "0x3DCCC000");
  EXPECT_EQ(o.blocks[1].bits("bf16"), "0xBDCC");
  EXPECT_EQ(o.blocks[1].bits("f8_e4m3fn"), "0x9C");
  EXPECT_EQ(o.blocks[2].bits("f16"), "0x7BFF");
  EXPECT_EQ(o.blocks[3].bits("f8_e4m3fn"), "0x7E");
  // 1e6 = 1.1110100001001b * 2^19; bf16 keeps 1110100|001.. -> 0 10010010 1110100 = 0x4974.
  EXPECT_EQ(o.blocks[3].bits("bf16"), "0x4974");
}

std::vector<std::string> repeated(const std::string& value, int n) {
  return std::vector<std::string>(static_cast<std::size_t>(n), value);
}

// Counts bf16 results of a stochastic cast: how many rounded up (0x3DCD) / down (0x3DCC).
void count_bf16_point_one(const CastOutput& o, int& up, int& down) {
  up = down = 0;
  for (const CastBlock& b : o.blocks) {
    const std::string bits = b.bits("bf16");
    if (bits == "0x3DCD") {
      ++up;
    } else if (bits == "0x3DCC") {
      ++down;
    } else {
      ADD_FAILURE() << "stochastic 0.1 -> bf16 gave " << bits << ", not a neighbour";
    }
  }
}

TEST(DtypeCast, StochasticIsReproducibleForASeed) {
  std::vector<std::string> args = repeated("0.1", 20);
  for (const char* a : {"--to", "bf16,f16,e4m3", "--rounding", "stochastic", "--seed", "7"})
    args.push_back(a);
  std::string first, second;
  const CastOutput o = cast_ok(args, &first);
  cast_ok(args, &second);
  EXPECT_EQ(o.rounding_line, "rounding stochastic, seed 7");
  EXPECT_EQ(o.blocks.size(), 20u);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, second);
}

TEST(DtypeCast, StochasticSeedsAndPositionsGiveBothRoundings) {
  // 0.1 -> bf16 lies between 0x3DCC and 0x3DCD; the discarded fraction is 0.1100 1100..b = 0.8,
  // so each input position rounds up with probability 0.8. Over 50 positions both results
  // appear (all-up has probability 0.8^50 ~ 1e-5) and two seeds disagree somewhere.
  std::vector<std::string> base = repeated("0.1", 50);
  for (const char* a : {"--to", "bf16", "--rounding", "stochastic", "--seed"}) base.push_back(a);
  std::vector<std::string> seed1 = base, seed2 = base;
  seed1.push_back("1");
  seed2.push_back("2");
  std::string out1, out2;
  const CastOutput o1 = cast_ok(seed1, &out1);
  const CastOutput o2 = cast_ok(seed2, &out2);
  ASSERT_EQ(o1.blocks.size(), 50u);
  ASSERT_EQ(o2.blocks.size(), 50u);
  int up1, down1, up2, down2;
  count_bf16_point_one(o1, up1, down1);
  count_bf16_point_one(o2, up2, down2);
  EXPECT_GT(up1, 0);
  EXPECT_GT(down1, 0);
  EXPECT_GT(up2, 0);
  EXPECT_GT(down2, 0);
  bool differ = false;
  for (std::size_t i = 0; i < 50; ++i)
    differ = differ || o1.blocks[i].bits("bf16") != o2.blocks[i].bits("bf16");
  EXPECT_TRUE(differ) << "seeds 1 and 2 gave the same 50 roundings";
}

TEST(DtypeCast, StochasticRoundsUpWithTheDiscardedFraction) {
  // As above, P(up) = 0.8. 400 positions: mean 320, sd sqrt(400 * 0.8 * 0.2) = 8; allow 5 sd.
  std::vector<std::string> args = repeated("0.1", 400);
  for (const char* a : {"--to", "bf16", "--rounding", "stochastic", "--seed", "12345"})
    args.push_back(a);
  const CastOutput o = cast_ok(args);
  ASSERT_EQ(o.blocks.size(), 400u);
  int up, down;
  count_bf16_point_one(o, up, down);
  EXPECT_EQ(up + down, 400);
  EXPECT_GE(up, 280);
  EXPECT_LE(up, 360);
}

// ---------------------------------------------------------------------------------------------
// Bad input and help

TEST(DtypeCastErrors, BadValue) {
  expect_usage_error({"dtype", "cast", "abc"}, "'abc'");
}

TEST(DtypeCastErrors, BadBits) {
  expect_usage_error({"dtype", "cast", "bits:0xZZ"}, "'bits:0xZZ'");
  // Nine hex digits do not fit an f32 word.
  expect_usage_error({"dtype", "cast", "bits:0x123456789"}, "'bits:0x123456789'");
}

TEST(DtypeCastErrors, UnknownTarget) {
  expect_usage_error({"dtype", "cast", "1.0", "--to", "bf17"}, "'bf17'");
  // f64 and integers are not narrowing targets.
  expect_usage_error({"dtype", "cast", "1.0", "--to", "bf16,f64"}, "'f64'");
  expect_usage_error({"dtype", "cast", "1.0", "--to", "i32"}, "'i32'");
  // E8M0 holds powers of two only: its roundings are the MX scale rules, not cast's modes.
  expect_usage_error({"dtype", "cast", "1.0", "--to", "e8m0"}, "'e8m0'");
}

TEST(DtypeCastErrors, UnknownRounding) {
  expect_usage_error({"dtype", "cast", "1.0", "--rounding", "foo"}, "'foo'");
}

TEST(DtypeCastErrors, BadSeedAndUnknownOption) {
  expect_usage_error({"dtype", "cast", "1.0", "--rounding", "stochastic", "--seed", "abc"}, "abc");
  expect_usage_error({"dtype", "cast", "1.0", "--bogus"}, "--bogus");
}

TEST(DtypeCastErrors, MissingValues) {
  expect_usage_error({"dtype", "cast"}, "values");
  expect_usage_error({"dtype", "cast", "--to", "bf16"}, "values");
}

TEST(DtypeErrors, MissingSubcommand) {
  expect_usage_error({}, "command is required");
  expect_usage_error({"dtype"}, "subcommand");
}

TEST(DtypeErrors, UnknownSubcommandIsNamed) {
  expect_usage_error({"dtype", "frob"}, "frob");
}

void expect_help(const std::vector<std::string>& args, const std::vector<std::string>& mentions) {
  const RunResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << describe(args, r);
  EXPECT_EQ(r.err, "") << describe(args, r);
  for (const std::string& m : mentions)
    EXPECT_NE(r.out.find(m), std::string::npos) << "help lacks '" << m << "'\n" << r.out;
}

TEST(Help, Top) {
  expect_help({"--help"}, {"dtype", "--help", "--version"});
}

TEST(Help, Dtype) {
  expect_help({"dtype", "--help"}, {"info", "cast"});
}

TEST(Help, DtypeCast) {
  expect_help({"dtype", "cast", "--help"}, {"values", "--to", "--rounding", "rne", "rtz",
                                            "stochastic", "--seed", "--saturate", "bits:0x"});
}

TEST(Help, DtypeInfo) {
  expect_help({"dtype", "info", "--help"}, {"names"});
}

}  // namespace
