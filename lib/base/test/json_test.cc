#include "trident/base/json.h"

#include <gtest/gtest.h>

namespace trident {
namespace {

using nlohmann::json;

// See Note [Checked integers]: fuzz_model found 1e+123 read as an int64 (undefined behaviour).
TEST(Json, IntegersOutOfRangeAreTypeErrors) {
  EXPECT_THROW(get_checked<std::int64_t>(json::parse("1e123")), json::type_error);
  EXPECT_THROW(get_checked<std::int64_t>(json::parse("9.3e18")), json::type_error);
  EXPECT_THROW(get_checked<int>(json::parse("4294967297")), json::type_error);
  EXPECT_THROW(get_checked<int>(json::parse("2.5")), json::type_error);
  EXPECT_THROW(get_checked<unsigned>(json::parse("-1")), json::type_error);
  EXPECT_THROW(get_checked<std::vector<std::int64_t>>(json::parse("[1, 1e300]")), json::type_error);
  EXPECT_THROW((get_checked<std::map<std::string, int>>(json::parse(R"({"a": 1e10})"))), json::type_error);
  EXPECT_THROW(get_checked<int>(json::parse("\"7\"")), json::type_error);
}

// fuzz_profile found a "format" that was a list: value("format", "") threw.
TEST(Json, FormatOfAnyKindIsReadWithoutThrowing) {
  EXPECT_TRUE(has_format(json::parse(R"({"format": "trident-plan/1"})"), "trident-plan/1"));
  EXPECT_FALSE(has_format(json::parse(R"({"format": "trident-plan/2"})"), "trident-plan/1"));
  for (const char* text : {R"({"format": [1, 2]})", R"({"format": 7})", R"({"format": null})", "{}", "[1]", "3"})
    EXPECT_FALSE(has_format(json::parse(text), "trident-plan/1")) << text;
}

TEST(Json, IntegersInRangeReadAsGetDoes) {
  EXPECT_EQ(get_checked<int>(json::parse("7.0")), 7);
  EXPECT_EQ(get_checked<int>(json::parse("-2147483648")), -2147483648LL);
  EXPECT_EQ(get_checked<std::int64_t>(json::parse("-9.223372036854775808e18")), INT64_MIN);
  EXPECT_EQ(get_checked<std::vector<std::int64_t>>(json::parse("[1, 2, 3]")), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(get_checked<double>(json::parse("1e123")), 1e123);
  EXPECT_EQ(get_checked<std::string>(json::parse("\"x\"")), "x");
  const auto obj = json::parse(R"({"n": 3, "big": 1e40})");
  EXPECT_EQ(value_checked(obj, "n", 0), 3);
  EXPECT_EQ(value_checked(obj, "missing", 5), 5);
  EXPECT_THROW(value_checked(obj, "big", 0), json::type_error);
}

}  // namespace
// Where two documents first differ, as a JSON pointer: rank 0's plan beside another rank's.
TEST(Json, FirstDifferenceNamesThePointerAndBothValues) {
  const auto a = nlohmann::json::parse(R"({"stages": [{"devices": [0, 3]}], "model": "mmt"})");
  auto b = a;
  EXPECT_EQ(first_difference(a, b), "");
  b["stages"][0]["devices"][1] = 2;
  EXPECT_EQ(first_difference(a, b), "/stages/0/devices/1: 3 vs 2");
  b = a;
  b.erase("model");
  EXPECT_EQ(first_difference(a, b), "/model: \"mmt\" vs (missing)");
  b = a;
  b["stages"].push_back(nullptr);
  EXPECT_EQ(first_difference(a, b), "/stages: 1 vs 2 entries");
}

}  // namespace trident
