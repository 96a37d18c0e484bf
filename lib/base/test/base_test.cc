#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "trident/base/enum_names.h"
#include "trident/base/error.h"
#include "trident/base/files.h"
#include "trident/base/test_hooks.h"
#include "trident/base/text.h"

namespace trident {
namespace {

namespace fs = std::filesystem;

TEST(Error, KindDecidesTheExitCode) {
  EXPECT_EQ(InputError("x").exit_code(), 2);
  EXPECT_EQ(Failure("x").exit_code(), 1);
  EXPECT_EQ(Error(ErrorKind::kBadInput, "x").kind(), ErrorKind::kBadInput);
}

TEST(Error, ContextIsPrintedBeforeTheMessageInOneOrder) {
  Failure e("waited too long");
  EXPECT_STREQ(e.what(), "waited too long");
  ErrorContext inner;
  inner.micro_batch = 3, inner.action = "B3";
  e.add_context(inner);
  ErrorContext outer;
  outer.rank = 2, outer.stage = 1, outer.replica = 0, outer.micro_batch = 7;
  e.add_context(outer);
  // The innermost micro-batch wins; the rank, stage and replica come from outside.
  EXPECT_STREQ(e.what(), "rank 2, stage 1, replica 0, micro-batch 3, action B3: waited too long");
  EXPECT_EQ(e.message(), "waited too long");
  EXPECT_EQ(*e.context().micro_batch, 3);
}

TEST(Error, RethrownWithContextKeepsItsType) {
  try {
    try {
      throw InputError("train.lr = -1 must be > 0");
    } catch (Error& e) {
      ErrorContext c;
      c.rank = 1;
      e.add_context(c);
      throw;
    }
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "rank 1: train.lr = -1 must be > 0");
    return;
  }
  FAIL() << "the InputError was lost";
}

TEST(Text, HumanBytesAndJoin) {
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(12.0 * 1024 * 1024), "12.0 MiB");
  EXPECT_EQ(human_bytes(1.5 * 1024 * 1024 * 1024), "1.50 GiB");
  EXPECT_EQ(join({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(join({"a"}, " | "), "a");
  EXPECT_EQ(join({}), "");
}

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trident-base-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(Files, AtomicWriteReplacesAndLeavesNoTemporary) {
  const auto path = (dir_ / "a.json").string();
  write_file_atomic(path, "{\"x\": 1}");
  write_file_atomic(path, "{\"x\": 2}");
  EXPECT_EQ(read_json_file(path, "test file").at("x"), 2);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(Files, AtomicWriteThatCannotCreateIsAFailureNamingThePath) {
  const auto path = (dir_ / "missing" / "a.txt").string();
  try {
    write_file_atomic(path, "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFailure);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(Files, FsyncOfAMissingPathIsAFailure) {
  EXPECT_THROW(fsync_path((dir_ / "nothing").string(), false), Failure);
}

TEST_F(Files, MalformedOrMissingJsonIsBadInputNamingThePath) {
  const auto path = (dir_ / "bad.json").string();
  std::ofstream(path) << "{\"x\": ";
  try {
    read_json_file(path, "plan");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_EQ(std::string(e.what()).rfind("plan " + path + " is not valid JSON", 0), 0u) << e.what();
  }
  EXPECT_THROW(read_json_file((dir_ / "none.json").string(), "plan"), InputError);
}

}  // namespace
// See Note [Test hooks]: "R:N" and "R:N:every" for steps, "R:X" for values; anything else is no hook.
TEST(TestHooks, ParseTheirFormsAndNothingElse) {
  const auto a = test_hooks::parse_rank_step("1:10");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->rank, 1);
  EXPECT_EQ(a->step, 10);
  EXPECT_FALSE(a->every_start);
  const auto b = test_hooks::parse_rank_step("2:7:every");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->every_start);
  EXPECT_EQ(b->step, 7);
  for (const char* bad : {"", "1", "x:2", "1:2:sometimes", "1:2x"}) EXPECT_FALSE(test_hooks::parse_rank_step(bad)) << bad;
  EXPECT_FALSE(test_hooks::parse_rank_step(nullptr));
  const auto c = test_hooks::parse_rank_value("2:4000");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->rank, 2);
  EXPECT_EQ(c->value, 4000);
  for (const char* bad : {"2", "2:", "2:40x", "a:1"}) EXPECT_FALSE(test_hooks::parse_rank_value(bad)) << bad;
}

}  // namespace trident

TEST(Text, Base64DecodesWhatPythonWrites) {
  // base64.b64encode(b"trident") == b"dHJpZGVudA==", and one and two bytes of padding.
  EXPECT_EQ(trident::base64_decode("dHJpZGVudA=="), "trident");
  EXPECT_EQ(trident::base64_encode("trident"), "dHJpZGVudA==");
  EXPECT_EQ(trident::base64_encode("triden"), "dHJpZGVu");
  EXPECT_EQ(trident::base64_encode("tride"), "dHJpZGU=");
  for (const std::string bytes : {std::string(""), std::string("\0\xff\x80", 3), std::string(1000, '\x7f')})
    EXPECT_EQ(trident::base64_decode(trident::base64_encode(bytes)), bytes);
  EXPECT_EQ(trident::base64_decode("dHJpZGVu"), "triden");
  EXPECT_EQ(trident::base64_decode("dHJpZGVudHM="), "tridents");
  EXPECT_EQ(trident::base64_decode(""), "");
  EXPECT_EQ(trident::base64_decode("AP8="), std::string("\x00\xff", 2));
  EXPECT_THROW(trident::base64_decode("dHJpZGVud"), trident::InputError);
  EXPECT_THROW(trident::base64_decode("dH*pZGVu"), trident::InputError);
  EXPECT_THROW(trident::base64_decode("dH==ZGVu"), trident::InputError);
}

namespace trident {
namespace {

enum class Colour { kRed, kGreen, kBlue };

// One table gives both directions and the list an error names as allowed.
TEST(EnumNames, NamesParsesAndListsFromOneTable) {
  const EnumNames<Colour> names{{Colour::kRed, "red"}, {Colour::kGreen, "green"}};
  EXPECT_EQ(names.name(Colour::kGreen), "green");
  EXPECT_EQ(names.name(Colour::kBlue), "?");  // not in the table
  EXPECT_EQ(names.parse("red"), Colour::kRed);
  EXPECT_EQ(names.parse("Red"), std::nullopt);
  EXPECT_EQ(names.names(), (std::vector<std::string>{"red", "green"}));
}

}  // namespace
}  // namespace trident
